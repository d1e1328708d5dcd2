//! Scenario files: the model, reading (YAML with positions), decoding and validation.
//!
//! `load` is the one entry point: it reads a file, and either returns a scenario that is safe to
//! plan or every problem found, each as `path:line:col: what is wrong; what was expected`.

pub(crate) mod decode;
pub use decode::SCENARIO_KEYS;
pub mod duration;
pub(crate) mod manifest;
pub(crate) mod model;
pub mod shipped;
pub mod validate;
pub(crate) mod yaml;

use std::fmt;
use std::path::{Path, PathBuf};

pub use model::*;
pub use yaml::Pos;

/// One problem with a scenario file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file.
    pub path: PathBuf,
    /// Where in it.
    pub pos: Pos,
    /// What is wrong; what was expected.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.path.display(),
            self.pos.line.max(1),
            self.pos.col.max(1),
            self.message
        )
    }
}

/// Why a scenario could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file has problems; all of them are listed.
    #[error("{}", .0.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<Diagnostic>),
    /// The file could not be read.
    #[error("{}: cannot read the scenario file: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A shipped file could not be written into the cache to be read (kubechaos's environment).
    #[error("the shipped `{name}` could not be written into kubechaos's cache {}: {source}; expected a writable $KUBECHAOS_CACHE (else ~/.cache/kubechaos)", path.display())]
    Cache {
        /// The shipped name asked for.
        name: String,
        /// The cache.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// No file by that name.
    #[error("no scenario `{name}`: looked for {} and among the shipped ones ({}); expected a path to a YAML file or one of those names (see `kubechaos list`)", .tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" and "), .shipped.join(", "))]
    NotFound {
        /// What the user asked for.
        name: String,
        /// Where it was looked for.
        tried: Vec<PathBuf>,
        /// The shipped names of that kind.
        shipped: Vec<&'static str>,
    },
}

/// The scenario files of a directory (`*.yaml`, `*.yml`), sorted; none if it cannot be read.
pub fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// The scenarios `kubechaos list` shows: those in `./scenarios`, then the shipped ones no file
/// there shadows (written into the cache, [`shipped::path`]).
pub fn catalog() -> Vec<PathBuf> {
    catalog_of("scenarios")
}

/// The files of `./DIR`, then the shipped ones of `DIR` whose names they do not have.
pub(crate) fn catalog_of(dir: &str) -> Vec<PathBuf> {
    let mut files = yaml_files(Path::new(dir));
    let local: Vec<String> = files
        .iter()
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    for name in shipped::names(dir) {
        if !local.iter().any(|l| l == name) {
            if let Some(Ok(p)) = shipped::path(dir, name) {
                files.push(p);
            }
        }
    }
    files
}

/// Find a scenario by path or by name.
pub fn resolve(name_or_path: &str) -> Result<PathBuf, LoadError> {
    resolve_in(name_or_path, "scenarios")
}

/// Find a file by path, or by name in `./DIR`, then among the shipped files of `DIR` (embedded
/// in the binary; written into the cache to be read).
pub fn resolve_in(name_or_path: &str, dir: &str) -> Result<PathBuf, LoadError> {
    let as_path = Path::new(name_or_path);
    if as_path.is_file() {
        return Ok(as_path.to_path_buf());
    }
    let mut tried = vec![as_path.to_path_buf()];
    if !name_or_path.contains('/') && !name_or_path.ends_with(".yaml") {
        let candidate = Path::new(dir).join(format!("{name_or_path}.yaml"));
        if candidate.is_file() {
            return Ok(candidate);
        }
        tried = vec![candidate];
        match shipped::path(dir, name_or_path) {
            Some(Ok(p)) => return Ok(p),
            Some(Err(source)) => {
                return Err(LoadError::Cache {
                    name: name_or_path.to_owned(),
                    path: shipped::cache_base(),
                    source,
                })
            }
            None => {}
        }
    }
    Err(LoadError::NotFound {
        name: name_or_path.to_owned(),
        tried,
        shipped: shipped::names(dir),
    })
}

/// Read, decode and validate a scenario file.
pub fn load(path: &Path) -> Result<Scenario, LoadError> {
    let bytes = read_bounded(path).map_err(|source| LoadError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(path, &bytes)
}

fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(yaml::MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Decode and validate scenario text (`path` is used for messages and for the name check).
pub fn parse(path: &Path, bytes: &[u8]) -> Result<Scenario, LoadError> {
    let diag = |pos: Pos, message: String| Diagnostic {
        path: path.to_path_buf(),
        pos,
        message,
    };
    if bytes.len() > yaml::MAX_FILE_BYTES {
        return Err(LoadError::Invalid(vec![diag(
            Pos { line: 1, col: 1 },
            format!("the file is larger than {} bytes; expected a scenario file (a few kilobytes of YAML)", yaml::MAX_FILE_BYTES),
        )]));
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let upto = &bytes[..e.valid_up_to()];
            let line = upto.iter().filter(|b| **b == b'\n').count() as u32 + 1;
            let col = upto.iter().rev().take_while(|b| **b != b'\n').count() as u32 + 1;
            return Err(LoadError::Invalid(vec![diag(
                Pos { line, col },
                "the file is not UTF-8 text; expected a YAML scenario file".into(),
            )]));
        }
    };
    if let Some(offset) = text.find('\0') {
        let line = text[..offset].matches('\n').count() as u32 + 1;
        return Err(LoadError::Invalid(vec![diag(
            Pos { line, col: 1 },
            "the file holds binary data (a NUL byte); expected a YAML scenario file".into(),
        )]));
    }
    let root = yaml::parse(text).map_err(|e| {
        LoadError::Invalid(vec![diag(
            e.pos,
            format!(
                "not valid YAML: {}; expected a YAML mapping (see `kubechaos schema`)",
                e.message
            ),
        )])
    })?;
    let mut scenario = decode::decode(&root).map_err(|mut problems| {
        problems.sort_by_key(|(pos, _)| *pos);
        LoadError::Invalid(problems.into_iter().map(|(pos, m)| diag(pos, m)).collect())
    })?;
    scenario.source.path = path.to_path_buf();
    // Manifests are read now, against the scenario file's directory: a missing file or a broken
    // object is said at its own place, before anything runs.
    let base = path.parent().unwrap_or(Path::new("."));
    let mut elsewhere = Vec::new();
    for m in &mut scenario.cluster.manifests {
        m.file = base.join(&m.written);
        match manifest::read(&m.file) {
            Ok(objects) => m.objects = objects,
            Err(found) => {
                if found.iter().any(|d| {
                    d.path == m.file && d.pos.line == 1 && d.message.starts_with("cannot read")
                }) {
                    elsewhere.push(diag(m.pos, format!("`cluster.manifests`: cannot read `{}` ({}); expected a YAML file of Kubernetes objects, its path relative to the scenario file", m.written, m.file.display())));
                } else {
                    elsewhere.extend(found);
                }
            }
        }
    }
    if !elsewhere.is_empty() {
        return Err(LoadError::Invalid(elsewhere));
    }
    let mut problems = validate::validate(&scenario);
    if let Some(stem) = path.file_stem().and_then(|s| s.to_str()) {
        if path.extension().is_some_and(|e| e == "yaml" || e == "yml") && stem != scenario.name {
            problems.push((
                scenario.source.name_pos,
                format!("name `{}` does not match the file name `{stem}`; expected them equal, since `kubechaos scenario NAME` finds NAME.yaml", scenario.name),
            ));
        }
    }
    if problems.is_empty() {
        Ok(scenario)
    } else {
        problems.sort_by_key(|(pos, _)| *pos);
        Err(LoadError::Invalid(
            problems.into_iter().map(|(pos, m)| diag(pos, m)).collect(),
        ))
    }
}

/// Remove the `null` alternatives schemars adds for `Option` fields.
fn drop_null(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::Object(map) => {
            if let Some(Value::Array(types)) = map.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let only = types.remove(0);
                    map.insert("type".into(), only);
                }
            }
            if let Some(Value::Array(alts)) = map.get("anyOf") {
                let rest: Vec<Value> = alts
                    .iter()
                    .filter(|a| a.get("type") != Some(&Value::from("null")))
                    .cloned()
                    .collect();
                if rest.len() == 1 {
                    map.remove("anyOf");
                    if let Value::Object(inner) = &rest[0] {
                        for (k, val) in inner {
                            map.insert(k.clone(), val.clone());
                        }
                    }
                }
            }
            map.values_mut().for_each(drop_null);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_null),
        _ => {}
    }
}

/// The JSON Schema of scenario files, pretty-printed.
///
/// Generated from the model (draft 2020-12). Optional fields are not nullable, because the
/// decoder does not accept `~` for them; component names are restricted to the known ones.
pub fn json_schema() -> String {
    let generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let schema = generator.into_root_schema_for::<Scenario>();
    let mut value = serde_json::to_value(&schema).expect("schema serializes");
    drop_null(&mut value);
    if let Some(obj) = value
        .pointer_mut("/$defs/Cluster/properties/components")
        .and_then(|v| v.as_object_mut())
    {
        let names: Vec<&str> = Component::ALL.iter().map(|c| c.name()).collect();
        obj.insert("propertyNames".into(), serde_json::json!({ "enum": names }));
    }
    serde_json::to_string_pretty(&value).expect("schema serializes") + "\n"
}

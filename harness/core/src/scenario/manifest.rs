//! `cluster.manifests`: Kubernetes YAML files a scenario carries with it, read and checked when
//! the scenario is loaded so that a missing file or a broken document is an input error (exit 2,
//! at the manifest's own line and column) and not a failure halfway through a run.

use std::path::Path;

use super::yaml::{self, Node, Pos, Value};
use super::Diagnostic;

/// Read the objects of a manifest file: every YAML document (`---` between them) that is not
/// empty must be a mapping with `apiVersion`, `kind` and `metadata.name`. Returns the objects as
/// JSON, in file order, or every problem found, at its place in the file.
pub(crate) fn read(file: &Path) -> Result<Vec<serde_json::Value>, Vec<Diagnostic>> {
    let diag = |pos: Pos, message: String| Diagnostic {
        path: file.to_path_buf(),
        pos,
        message,
    };
    let bytes = std::fs::read(file).map_err(|e| {
        vec![diag(
            Pos { line: 1, col: 1 },
            format!("cannot read the manifest: {e}; expected a YAML file of Kubernetes objects"),
        )]
    })?;
    if bytes.len() > yaml::MAX_FILE_BYTES {
        return Err(vec![diag(
            Pos { line: 1, col: 1 },
            format!(
                "the manifest is larger than {} bytes; expected a few Kubernetes objects",
                yaml::MAX_FILE_BYTES
            ),
        )]);
    }
    let text = String::from_utf8(bytes).map_err(|_| {
        vec![diag(
            Pos { line: 1, col: 1 },
            "the manifest is not UTF-8 text; expected YAML".into(),
        )]
    })?;
    let nodes = yaml::parse_all(&text).map_err(|e| {
        vec![diag(
            e.pos,
            format!(
                "not valid YAML: {}; expected Kubernetes objects as YAML documents",
                e.message
            ),
        )]
    })?;
    let values: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).map_err(|e| {
        vec![diag(
            Pos { line: 1, col: 1 },
            format!("not valid YAML: {e}"),
        )]
    })?;
    let mut problems = Vec::new();
    let mut objects = Vec::new();
    for (node, value) in nodes.iter().zip(values) {
        if matches!(node.value, Value::Null) {
            continue;
        }
        match check(node) {
            Ok(()) => objects.push(value),
            Err((pos, m)) => problems.push(diag(pos, m)),
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    if objects.is_empty() {
        return Err(vec![diag(
            Pos { line: 1, col: 1 },
            "the manifest holds no object; expected at least one Kubernetes object".into(),
        )]);
    }
    Ok(objects)
}

/// The string at `key` of a mapping.
fn field<'a>(entries: &'a [(Node, Node)], key: &str) -> Option<&'a Node> {
    entries
        .iter()
        .find(|(k, _)| matches!(&k.value, Value::Str(s) if s == key))
        .map(|(_, v)| v)
}

fn check(doc: &Node) -> Result<(), (Pos, String)> {
    let Value::Map(entries) = &doc.value else {
        return Err((
            doc.pos,
            format!(
                "a document is {}; expected a Kubernetes object (a mapping with `apiVersion`, `kind` and `metadata`)",
                doc.value.kind()
            ),
        ));
    };
    for key in ["apiVersion", "kind"] {
        match field(entries, key).map(|n| &n.value) {
            Some(Value::Str(s)) if !s.is_empty() => {}
            _ => {
                return Err((
                    doc.pos,
                    format!("an object has no `{key}`; expected `apiVersion`, `kind` and `metadata.name` in every document"),
                ))
            }
        }
    }
    let name = field(entries, "metadata").and_then(|m| match &m.value {
        Value::Map(meta) => field(meta, "name"),
        _ => None,
    });
    match name.map(|n| &n.value) {
        Some(Value::Str(s)) if !s.is_empty() => Ok(()),
        _ => Err((
            doc.pos,
            "an object has no `metadata.name`; expected every object named (`generateName` cannot be deleted at the end)".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str) -> Result<Vec<serde_json::Value>, Vec<String>> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.yaml");
        std::fs::write(&file, text).unwrap();
        read(&file).map_err(|ds| {
            ds.into_iter()
                .map(|d| format!("{}:{}: {}", d.pos.line, d.pos.col, d.message))
                .collect()
        })
    }

    #[test]
    fn documents_become_objects_in_file_order() {
        let objects = read_text(
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: a}\ndata: {ratio: 0.5}\n",
        )
        .unwrap();
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[1]["kind"], "ConfigMap");
        assert_eq!(objects[1]["data"]["ratio"], 0.5);
    }

    #[test]
    fn broken_documents_are_said_where_they_are() {
        let e = read_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\nkind: Pod\nmetadata: {name: p}\n").unwrap_err();
        assert!(
            e[0].starts_with("5:1: an object has no `apiVersion`"),
            "{e:?}"
        );
        let e = read_text("apiVersion: v1\nkind: Pod\nmetadata: {generateName: p-}\n").unwrap_err();
        assert!(e[0].contains("no `metadata.name`"), "{e:?}");
        let e = read_text("a: [b\n").unwrap_err();
        assert!(e[0].contains("not valid YAML"), "{e:?}");
        let e = read_text("- a\n").unwrap_err();
        assert!(e[0].contains("a document is a list"), "{e:?}");
        let e = read_text("").unwrap_err();
        assert!(e[0].contains("holds no object"), "{e:?}");
    }
}

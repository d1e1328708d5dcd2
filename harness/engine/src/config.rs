//! kubechaos's own configuration file: the contexts the safety guard lets it break besides the
//! obviously disposable ones, so that a team can name its chaos clusters once instead of on
//! every command line.
//!
//! ```yaml
//! # ~/.config/kubechaos/config.yaml
//! allow-contexts: [staging-chaos, ci-east]
//! ```
//!
//! Found at `--config FILE`, else `$KUBECHAOS_CONFIG`, else `$XDG_CONFIG_HOME/kubechaos/config.yaml`
//! (`~/.config/kubechaos/config.yaml`) when that file exists.

use std::path::{Path, PathBuf};

/// The configuration file's contents.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Contexts the safety guard allows, as `--allow-context` would.
    #[serde(default)]
    pub allow_contexts: Vec<String>,
}

/// Where the configuration file is looked for when none is named.
pub(crate) fn default_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KUBECHAOS_CONFIG").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("kubechaos").join("config.yaml"))
}

/// Why the configuration file could not be used (exit 2: the user's file).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// It could not be read.
    #[error("cannot read the configuration file {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It is not what kubechaos reads.
    #[error("{}:{line}:{column}: {what}; expected `allow-contexts: [NAME, ...]` (the contexts the safety guard allows besides kind-*, k3d-* and kubechaos-local)", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Line, from 1.
        line: usize,
        /// Column, from 1.
        column: usize,
        /// What is wrong there.
        what: String,
    },
}

/// Read the configuration: `named` (it must exist), else the default path if it exists, else
/// the empty configuration. Errors say FILE:LINE:COL, what was expected.
pub fn load(named: Option<&Path>) -> Result<Config, ConfigError> {
    let (path, required) = match named {
        Some(p) => (p.to_path_buf(), true),
        None => match default_path() {
            Some(p) => {
                let required = std::env::var_os("KUBECHAOS_CONFIG").is_some_and(|v| !v.is_empty());
                (p, required)
            }
            None => return Ok(Config::default()),
        },
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => {
            return Ok(Config::default())
        }
        Err(source) => return Err(ConfigError::Read { path, source }),
    };
    if text.trim().is_empty() {
        return Ok(Config::default());
    }
    serde_saphyr::from_str::<Config>(&text).map_err(|e| {
        let (line, column) = e
            .location()
            .map(|l| (l.line() as usize, l.column() as usize))
            .unwrap_or((1, 1));
        let what = e.without_snippet().to_string();
        let what = what
            .lines()
            .next()
            .unwrap_or("not valid YAML")
            .trim()
            .to_owned();
        ConfigError::Invalid {
            path,
            line,
            column,
            what,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_names_contexts_and_its_mistakes_have_a_position() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.yaml");
        std::fs::write(&good, "allow-contexts: [staging-chaos, ci-east]\n").unwrap();
        assert_eq!(
            load(Some(&good)).unwrap().allow_contexts,
            ["staging-chaos", "ci-east"]
        );
        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, "# chaos clusters\nallow-context: [staging]\n").unwrap();
        let err = load(Some(&bad)).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{}:2:1: ", bad.display())),
            "{err}"
        );
        assert!(err.contains("allow-context"), "{err}");
        assert!(
            err.contains("expected `allow-contexts: [NAME, ...]`"),
            "{err}"
        );
        let missing = load(Some(&dir.path().join("none.yaml")))
            .unwrap_err()
            .to_string();
        assert!(
            missing.contains("cannot read the configuration file"),
            "{missing}"
        );
    }
}

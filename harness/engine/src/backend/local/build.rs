//! The pinned upstream binaries: etcd, kube-apiserver, kube-scheduler and kube-controller-manager,
//! built from the Go module proxy at the versions pinned in `fixtures/control-plane/` into a
//! versioned cache outside the repository (`~/.cache/kubechaos/k8s-vX.Y.Z/`, or
//! `$KUBECHAOS_CACHE/k8s-vX.Y.Z/`). No binary is ever committed. The pins (each module's `go.mod`
//! and `go.sum`) are embedded in kubechaos and written into the cache to build there, so that
//! an installed kubechaos builds from any directory with no checkout on the machine.
//!
//! Known facts this follows: `go install …@version` is refused for both projects, so each is built
//! inside its own module (`fixtures/control-plane/kubernetes`, which replaces every staging module
//! by its release, and `fixtures/control-plane/etcd`, so that grpc/otel versions don't fight);
//! `CGO_ENABLED=0` as upstream does; the version is stamped with `-ldflags -X` so that `--version`
//! tells the truth.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The pinned Go modules, embedded: (module directory, file, text).
const MODULES: [(&str, &str, &str); 4] = [
    (
        "kubernetes",
        "go.mod",
        include_str!("../../../../../fixtures/control-plane/kubernetes/go.mod"),
    ),
    (
        "kubernetes",
        "go.sum",
        include_str!("../../../../../fixtures/control-plane/kubernetes/go.sum"),
    ),
    (
        "etcd",
        "go.mod",
        include_str!("../../../../../fixtures/control-plane/etcd/go.mod"),
    ),
    (
        "etcd",
        "go.sum",
        include_str!("../../../../../fixtures/control-plane/etcd/go.sum"),
    ),
];

/// The embedded text of a module's file.
fn module_file(dir: &str, file: &str) -> &'static str {
    MODULES
        .iter()
        .find(|(d, f, _)| *d == dir && *f == file)
        .map(|(.., t)| *t)
        .expect("every pinned module has a go.mod and a go.sum")
}

/// Write the embedded modules into `dir` (`dir/kubernetes/go.mod`, …), as they are embedded.
fn write_modules(dir: &Path) -> Result<(), BuildError> {
    for (module, file, text) in MODULES {
        let folder = dir.join(module);
        let path = folder.join(file);
        std::fs::create_dir_all(&folder)
            .and_then(|()| std::fs::write(&path, text))
            .map_err(|source| BuildError::Io {
                what: format!("write the pinned module file {}", path.display()),
                source,
            })?;
    }
    Ok(())
}

/// Why the binaries could not be had. Every variant is an environment failure (exit 3).
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A pin is missing.
    #[error("cannot read the pinned versions in {}: no `require {module} vX.Y.Z` line", path.display())]
    PinMissing {
        /// The go.mod.
        path: PathBuf,
        /// The module whose version is missing.
        module: String,
    },
    /// Go is missing.
    #[error("`go` is not on PATH; the local backend builds the control plane from source with Go 1.26 or newer")]
    NoGo,
    /// The build failed.
    #[error("building {binary} failed (exit {code}); the last lines of its output:\n{tail}")]
    Failed {
        /// Which binary.
        binary: String,
        /// Exit code.
        code: i32,
        /// Last lines of output.
        tail: String,
    },
    /// The built binary does not report the pinned version.
    #[error("{binary} reports `{got}`, expected {want}")]
    WrongVersion {
        /// Which binary.
        binary: String,
        /// What it said.
        got: String,
        /// What was pinned.
        want: String,
    },
    /// Anything else on the file system, or `go` could not be run.
    #[error("cannot {what}")]
    Io {
        /// What could not be done.
        what: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The pinned versions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pins {
    /// `v1.37.2`.
    pub kubernetes: String,
    /// `v3.6.16`.
    pub etcd: String,
}

fn required_version(dir: &str, module: &str) -> Result<String, BuildError> {
    module_file(dir, "go.mod")
        .lines()
        .map(|l| l.trim().trim_start_matches("require").trim())
        .find_map(|l| {
            let mut parts = l.split_whitespace();
            (parts.next() == Some(module))
                .then(|| parts.next().map(str::to_owned))
                .flatten()
        })
        .filter(|v| v.starts_with('v'))
        .ok_or_else(|| BuildError::PinMissing {
            path: Path::new("fixtures/control-plane").join(dir).join("go.mod"),
            module: module.to_owned(),
        })
}

impl Pins {
    /// The pins embedded in this kubechaos (`fixtures/control-plane/*/go.mod`).
    pub fn embedded() -> Result<Pins, BuildError> {
        Ok(Pins {
            kubernetes: required_version("kubernetes", "k8s.io/kubernetes")?,
            etcd: required_version("etcd", "go.etcd.io/etcd/server/v3")?,
        })
    }

    /// The cache directory for these pins.
    pub fn cache_dir(&self) -> PathBuf {
        kubechaos_core::scenario::shipped::cache_base()
            .join(format!("k8s-{}-etcd-{}", self.kubernetes, self.etcd))
    }
}

/// One binary to build.
struct Target {
    name: &'static str,
    module_dir: &'static str,
    package: &'static str,
}

const TARGETS: [Target; 4] = [
    Target {
        name: "etcd",
        module_dir: "etcd",
        package: "go.etcd.io/etcd/server/v3",
    },
    Target {
        name: "kube-apiserver",
        module_dir: "kubernetes",
        package: "k8s.io/kubernetes/cmd/kube-apiserver",
    },
    Target {
        name: "kube-scheduler",
        module_dir: "kubernetes",
        package: "k8s.io/kubernetes/cmd/kube-scheduler",
    },
    Target {
        name: "kube-controller-manager",
        module_dir: "kubernetes",
        package: "k8s.io/kubernetes/cmd/kube-controller-manager",
    },
];

/// Names of the binaries, in start order.
pub const BINARIES: [&str; 4] = [
    "etcd",
    "kube-apiserver",
    "kube-scheduler",
    "kube-controller-manager",
];

fn ldflags(pins: &Pins, t: &Target) -> String {
    if t.name == "etcd" {
        return "-s -w".into();
    }
    let v = &pins.kubernetes;
    let mut parts = v.trim_start_matches('v').split('.');
    let (major, minor) = (parts.next().unwrap_or("1"), parts.next().unwrap_or("0"));
    format!(
        "-s -w -X k8s.io/component-base/version.gitVersion={v} -X k8s.io/component-base/version.gitMajor={major} \
         -X k8s.io/component-base/version.gitMinor={minor} -X k8s.io/component-base/version.gitTreeState=clean \
         -X k8s.io/client-go/pkg/version.gitVersion={v} -X k8s.io/client-go/pkg/version.gitMajor={major} \
         -X k8s.io/client-go/pkg/version.gitMinor={minor}"
    )
}

/// What the binary must print for `--version`.
fn expected_version(pins: &Pins, name: &str) -> String {
    if name == "etcd" {
        pins.etcd.trim_start_matches('v').to_owned()
    } else {
        pins.kubernetes.clone()
    }
}

fn version_of(path: &Path) -> Option<String> {
    let out = Command::new(path).arg("--version").output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// The binaries for the pins, built if missing (printing progress through `say`). Returns the
/// directory that holds them.
pub fn ensure(pins: &Pins, say: &mut dyn FnMut(&str)) -> Result<PathBuf, BuildError> {
    let dir = pins.cache_dir();
    let missing: Vec<&Target> = TARGETS
        .iter()
        .filter(|t| !dir.join(t.name).is_file())
        .collect();
    if missing.is_empty() {
        return Ok(dir);
    }
    if Command::new("go").arg("version").output().is_err() {
        return Err(BuildError::NoGo);
    }
    std::fs::create_dir_all(&dir).map_err(|source| BuildError::Io {
        what: format!("create {}", dir.display()),
        source,
    })?;
    // The modules are built where kubechaos writes them, not from a checkout.
    let modules = dir.join("src");
    write_modules(&modules)?;
    say(&format!(
        "building the control plane once (Kubernetes {}, etcd {}) into {}; later runs reuse it",
        pins.kubernetes,
        pins.etcd,
        dir.display()
    ));
    for (i, t) in missing.iter().enumerate() {
        let started = Instant::now();
        say(&format!("  [{}/{}] {} ...", i + 1, missing.len(), t.name));
        // Build next to the target and rename, so that an interrupted build leaves nothing that
        // looks finished.
        let partial = dir.join(format!(".{}.partial", t.name));
        let out = Command::new("go")
            .current_dir(modules.join(t.module_dir))
            .env("CGO_ENABLED", "0")
            .env("GOFLAGS", "-mod=mod")
            .args(["build", "-trimpath", "-ldflags", &ldflags(pins, t), "-o"])
            .arg(&partial)
            .arg(t.package)
            .output()
            .map_err(|source| BuildError::Io {
                what: "run go".to_owned(),
                source,
            })?;
        if !out.status.success() {
            let _ = std::fs::remove_file(&partial);
            let text = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = text.lines().rev().take(20).collect();
            return Err(BuildError::Failed {
                binary: t.name.into(),
                code: out.status.code().unwrap_or(-1),
                tail: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
            });
        }
        let got = version_of(&partial).unwrap_or_default();
        let want = expected_version(pins, t.name);
        if !got.contains(&want) {
            let _ = std::fs::remove_file(&partial);
            return Err(BuildError::WrongVersion {
                binary: t.name.into(),
                got: got.trim().to_owned(),
                want,
            });
        }
        std::fs::rename(&partial, dir.join(t.name)).map_err(|source| BuildError::Io {
            what: format!("install {}", t.name),
            source,
        })?;
        say(&format!(
            "  [{}/{}] {} built in {:.0}s",
            i + 1,
            missing.len(),
            t.name,
            started.elapsed().as_secs_f64()
        ));
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_are_read_from_the_fixtures() {
        let pins = Pins::embedded().expect("the fixtures pin both");
        assert!(pins.kubernetes.starts_with("v1.3"), "{pins:?}");
        assert!(pins.etcd.starts_with("v3.6."), "{pins:?}");
        assert!(pins
            .cache_dir()
            .ends_with(format!("k8s-{}-etcd-{}", pins.kubernetes, pins.etcd)));
        // What is embedded is what the repository pins, file for file; and it can be written out.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/control-plane");
        let out = tempfile::tempdir().unwrap();
        write_modules(out.path()).unwrap();
        for (module, file, text) in MODULES {
            let pinned = std::fs::read_to_string(root.join(module).join(file)).unwrap();
            assert_eq!(text, pinned, "{module}/{file}");
            let written = std::fs::read_to_string(out.path().join(module).join(file)).unwrap();
            assert_eq!(written, pinned, "{module}/{file}");
        }
    }
}

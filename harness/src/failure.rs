//! How a command ends: a [`Verdict`], or a [`Failure`] that says what went wrong. This is the one
//! place a command's end becomes one of the stable exit codes (see [`crate::exit`]), as
//! cargo-nextest's `ExpectedError` does: commands return typed results, and [`Failure::code`]
//! and [`Failure::report`] decide the code and the words.

use std::path::PathBuf;

use crate::exit;
use kubechaos_core::error::chain;
use kubechaos_core::scenario::{Diagnostic, LoadError, Pos};
use kubechaos_engine::backend::kube::error::KubeError;
use kubechaos_engine::backend::local::build::BuildError;
use kubechaos_engine::backend::local::error::LocalError;
use kubechaos_engine::backend::BackendError;
use kubechaos_engine::config::ConfigError;
use kubechaos_engine::explore::ExploreError;
use kubechaos_engine::kubeclient::ClientError;
use kubechaos_engine::recover::RecoverError;

/// A command that ran to its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every invariant held, or the command did what it was asked (exit 0).
    Held,
    /// An invariant was violated, or what was waited for did not happen (exit 1).
    Violated,
}

impl Verdict {
    /// Held when `held`, else violated.
    pub fn of(held: bool) -> Verdict {
        if held {
            Verdict::Held
        } else {
            Verdict::Violated
        }
    }
}

/// Why a command did not run to its end.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    // The user's input (exit 2).
    /// A scenario file that cannot be found, read or decoded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A scenario the chosen backend cannot run, with where it asks for each thing.
    #[error("the {backend} backend cannot run this scenario")]
    Unsupported {
        /// The scenario file.
        path: PathBuf,
        /// The backend.
        backend: &'static str,
        /// What it cannot do, and where.
        problems: Vec<(Pos, String)>,
    },
    /// A flag, a path or a file given wrongly: the whole message, what was expected included.
    #[error("{0}")]
    Input(String),
    /// kubechaos's configuration file.
    #[error(transparent)]
    Config(#[from] ConfigError),

    // Either, by kind.
    /// The kube backend's target: the guard and a missing context are input, the rest the
    /// environment.
    #[error(transparent)]
    Kube(#[from] KubeError),
    /// A recovery: refused (input) or the cluster failed (environment).
    #[error(transparent)]
    Recover(#[from] RecoverError),
    /// A run: unsupported (input), the world failed or the run was interrupted (environment).
    #[error(transparent)]
    Backend(#[from] BackendError),

    // The environment (exit 3).
    /// A file kubechaos writes.
    #[error("cannot write the {what} to {}", path.display())]
    Write {
        /// What it is (`events`, `JUnit report`).
        what: &'static str,
        /// Where.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The pinned control plane could not be built.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The local control plane, or a run directory of it.
    #[error("the local control plane did not start")]
    Local(#[source] LocalError),
    /// `cluster down` could not stop or remove a run.
    #[error(transparent)]
    Down(LocalError),
    /// No client for a cluster.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// Exploring stopped.
    #[error(transparent)]
    Explore(#[from] ExploreError),
    /// The async runtime could not start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// Ctrl-C or SIGTERM stopped the command; everything it started was stopped.
    #[error("{0}")]
    Interrupted(String),
    /// Some runs of a suite could not run; each was reported as it ended.
    #[error("{0}")]
    NotRun(String),
}

impl Failure {
    /// The stable exit code: 2 for the user's input, 3 for the environment.
    pub fn code(&self) -> i32 {
        match self {
            Failure::Load(LoadError::Cache { .. }) => exit::ENVIRONMENT,
            Failure::Load(_)
            | Failure::Unsupported { .. }
            | Failure::Input(_)
            | Failure::Config(_) => exit::BAD_INPUT,
            Failure::Kube(e) => match e {
                KubeError::NotDisposable { .. }
                | KubeError::NoContext
                | KubeError::NotInAPod
                | KubeError::Kubeconfig { .. }
                | KubeError::NoTestcontainers => exit::BAD_INPUT,
                KubeError::Client(_)
                | KubeError::Api { .. }
                | KubeError::Machine { .. }
                | KubeError::LoadBalancer { .. }
                | KubeError::NodeContainers { .. }
                | KubeError::Container { .. }
                | KubeError::Agents { .. } => exit::ENVIRONMENT,
            },
            Failure::Recover(RecoverError::Refused(_)) => exit::BAD_INPUT,
            Failure::Recover(RecoverError::Cluster { .. }) => exit::ENVIRONMENT,
            Failure::Backend(BackendError::Unsupported { .. }) => exit::BAD_INPUT,
            Failure::Backend(BackendError::Environment(_) | BackendError::Interrupted { .. }) => {
                exit::ENVIRONMENT
            }
            Failure::Write { .. }
            | Failure::Build(_)
            | Failure::Local(_)
            | Failure::Down(_)
            | Failure::Client(_)
            | Failure::Explore(_)
            | Failure::Runtime(_)
            | Failure::Interrupted(_)
            | Failure::NotRun(_) => exit::ENVIRONMENT,
        }
    }

    /// Say it on standard error: positions for problems in files (FILE:LINE:COL: what; what
    /// was expected), otherwise `kubechaos: what: why`.
    pub fn report(&self) {
        match self {
            Failure::Load(e) => {
                eprintln!("{e}");
                if let LoadError::Invalid(d) = e {
                    if d.len() > 1 {
                        eprintln!("{} problems", d.len());
                    }
                }
            }
            Failure::Unsupported {
                path,
                backend,
                problems,
            } => {
                print_problems(path, problems);
                eprintln!("kubechaos: the {backend} backend cannot run this scenario");
            }
            Failure::Input(message) => eprintln!("{message}"),
            _ => eprintln!("kubechaos: {}", chain(self)),
        }
    }

    /// A run's failure, with the scenario file its problems point into.
    pub fn of_run(path: &std::path::Path, e: BackendError) -> Failure {
        match e {
            BackendError::Unsupported { backend, problems } => Failure::Unsupported {
                path: path.to_owned(),
                backend,
                problems,
            },
            e => Failure::Backend(e),
        }
    }
}

/// Each problem as FILE:LINE:COL: message.
pub fn print_problems(path: &std::path::Path, problems: &[(Pos, String)]) {
    for (pos, message) in problems {
        eprintln!(
            "{}",
            Diagnostic {
                path: path.to_owned(),
                pos: *pos,
                message: message.clone(),
            }
        );
    }
}

/// The exit code of a command's end, said on standard error when it failed.
pub fn exit_code(end: Result<Verdict, Failure>) -> i32 {
    match end {
        Ok(Verdict::Held) => exit::HELD,
        Ok(Verdict::Violated) => exit::VIOLATED,
        Err(f) => {
            f.report();
            f.code()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io() -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::PermissionDenied, "permission denied")
    }

    /// What the user gave wrongly is 2, what failed underneath is 3, whichever command it came
    /// from; a run's failure is judged by its kind.
    #[test]
    fn each_failure_has_its_stable_exit_code() {
        let input = [
            Failure::Input("kubechaos suite: /x does not exist".into()),
            Failure::Load(LoadError::NotFound {
                name: "x".into(),
                tried: vec![],
                shipped: vec![],
            }),
            Failure::Kube(KubeError::NoContext),
            Failure::Kube(KubeError::NotDisposable {
                context: "prod".into(),
                own: "kubechaos-local",
            }),
            Failure::Recover(RecoverError::Refused("no such node".into())),
            Failure::Backend(BackendError::Unsupported {
                backend: "sim",
                problems: vec![],
            }),
            Failure::Unsupported {
                path: "x.yaml".into(),
                backend: "kube",
                problems: vec![],
            },
        ];
        for f in &input {
            assert_eq!(f.code(), exit::BAD_INPUT, "{f:?}");
        }
        let environment = [
            Failure::Write {
                what: "events",
                path: "/x".into(),
                source: io(),
            },
            Failure::Runtime(io()),
            Failure::Local(LocalError::Interrupted),
            Failure::Interrupted("stopped".into()),
            Failure::NotRun("1 scenario(s) could not run".into()),
            Failure::Backend(BackendError::Interrupted {
                message: "interrupted".into(),
                events: vec![],
            }),
            Failure::Build(BuildError::NoGo),
        ];
        for f in &environment {
            assert_eq!(f.code(), exit::ENVIRONMENT, "{f:?}");
        }
    }

    /// A failure is said with its causes on one line.
    #[test]
    fn a_failure_keeps_its_causes() {
        let f = Failure::Write {
            what: "JUnit report",
            path: "/ro/junit.xml".into(),
            source: io(),
        };
        assert_eq!(
            chain(&f),
            "cannot write the JUnit report to /ro/junit.xml: permission denied"
        );
    }
}

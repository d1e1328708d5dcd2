//! The docker CLI, how the kind and k3s providers reach their nodes (each node is a container):
//! one command run to its end with a time limit, or spawned to be read while it runs (a node's
//! event stream).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::error::DockerError;

/// How long one docker command may take.
const DOCKER_TIMEOUT: Duration = Duration::from_secs(60);

/// `crictl` with room to answer: it bounds each call to the runtime by 2 s unless told
/// otherwise, and a node whose cores are saturated answers later (a `ps` that timed out would
/// read as nothing running, a kill as done).
pub(crate) const CRICTL: &str = "crictl --timeout 20s";

/// The docker CLI (`$KUBECHAOS_DOCKER`, else `docker` on PATH).
#[derive(Clone, Debug)]
pub(crate) struct Docker {
    program: PathBuf,
}

impl Default for Docker {
    fn default() -> Self {
        Docker {
            program: std::env::var_os("KUBECHAOS_DOCKER")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("docker")),
        }
    }
}

impl Docker {
    /// The CLI at `program` (tests: a stand-in).
    #[cfg(test)]
    pub(crate) fn at(program: impl Into<PathBuf>) -> Docker {
        Docker {
            program: program.into(),
        }
    }

    /// `docker ARGS`, to spawn (a stream read while it runs).
    pub(crate) fn command(&self, args: &[&str]) -> std::process::Command {
        let mut c = std::process::Command::new(&self.program);
        c.args(args);
        c
    }

    /// Run `docker ARGS`; its stdout, or what went wrong.
    pub(crate) fn run(&self, args: &[String]) -> Result<String, DockerError> {
        let shown = format!("docker {}", args.join(" "));
        let spawn = || {
            std::process::Command::new(&self.program)
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
        };
        // A program just written cannot be run while a process forked meanwhile still holds
        // its write descriptor (ETXTBSY, until that process execs): try again for a moment.
        let mut tries = 0;
        let mut child = loop {
            match spawn() {
                Err(e) if e.raw_os_error() == Some(nix::libc::ETXTBSY) && tries < 50 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
                r => {
                    break r.map_err(|source| DockerError::Spawn {
                        program: self.program.clone(),
                        source,
                    })?
                }
            }
        };
        // Its output is read while it runs: one that writes more than a pipe holds (an etcd's
        // metrics) would otherwise wait for a reader until the timeout.
        let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                if let Some(mut p) = pipe {
                    let _ = p.read_to_end(&mut bytes);
                }
                bytes
            })
        };
        let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
        let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
        let deadline = Instant::now() + DOCKER_TIMEOUT;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(DockerError::Timeout {
                        shown,
                        limit: DOCKER_TIMEOUT,
                    });
                }
                Err(source) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(DockerError::Output { shown, source });
                }
            }
        };
        let out = std::process::Output {
            status,
            stdout: stdout.join().unwrap_or_default(),
            stderr: stderr.join().unwrap_or_default(),
        };
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(DockerError::Failed {
                shown,
                status: out.status,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            })
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A recording stand-in for the docker CLI: appends its arguments, one call a line, to a log.
    pub(crate) fn stand_in() -> (tempfile::TempDir, Docker, PathBuf) {
        stand_in_answering("")
    }

    /// The recording stand-in, which then runs `answer` (shell, with the arguments in `$@`).
    pub(crate) fn stand_in_answering(answer: &str) -> (tempfile::TempDir, Docker, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("docker.log");
        let bin = dir.path().join("docker");
        std::fs::write(
            &bin,
            format!(
                "#!/bin/sh\n[ \"$1\" = __ready ] && exit 0\nprintf '%s\\n' \"$*\" >> {}\n{answer}\n",
                log.display()
            ),
        )
        .expect("stand-in");
        std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
        // A child forked by a test on another thread while the script was open for writing
        // holds it open until it execs: running it then fails with ETXTBSY. Wait for that to pass.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !std::process::Command::new(&bin)
            .arg("__ready")
            .status()
            .is_ok_and(|s| s.success())
        {
            assert!(Instant::now() < deadline, "the docker stand-in never ran");
            std::thread::sleep(Duration::from_millis(10));
        }
        (dir, Docker::at(bin), log)
    }
}

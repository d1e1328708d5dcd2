//! What each command does, thinly: read its flags, call the core and the engine, print, and end
//! in a [`Verdict`] or a [`Failure`] (which `main` turns into the exit code).

pub mod agent;
pub mod cluster;
pub mod files;
pub mod init;
pub mod recover;
pub mod run;

use std::path::Path;

use crate::failure::{Failure, Verdict};

/// The end of every command.
pub type End = Result<Verdict, Failure>;

/// Standard output as it was before [`json_to_stdout`] sent everything else to standard error.
static STDOUT: std::sync::OnceLock<std::sync::Mutex<std::fs::File>> = std::sync::OnceLock::new();

/// `--json -`: the JSON summary is all that standard output carries, as `kubectl -o json` does;
/// everything else a command prints goes to standard error from here on.
fn json_to_stdout() -> Result<(), Failure> {
    use std::os::fd::AsFd;
    let out = std::io::stdout();
    let io = |source| Failure::Write {
        what: "JSON summary",
        path: "-".into(),
        source,
    };
    let saved = out.as_fd().try_clone_to_owned().map_err(io)?;
    nix::unistd::dup2_stdout(std::io::stderr().as_fd()).map_err(|e| io(std::io::Error::from(e)))?;
    let _ = STDOUT.set(std::sync::Mutex::new(std::fs::File::from(saved)));
    Ok(())
}

/// Write a file kubechaos produces (`-`: standard output, see [`json_to_stdout`]).
fn write_file(path: &Path, content: &[u8], what: &'static str) -> Result<(), Failure> {
    let io = |source| Failure::Write {
        what,
        path: path.to_owned(),
        source,
    };
    if path == Path::new("-") {
        fn put(mut out: impl std::io::Write, content: &[u8]) -> std::io::Result<()> {
            out.write_all(content)?;
            out.flush()
        }
        return match STDOUT.get() {
            Some(out) => put(&*out.lock().expect("stdout"), content),
            None => put(std::io::stdout().lock(), content),
        }
        .map_err(io);
    }
    std::fs::write(path, content).map_err(io)
}

/// Whether `path` can be written, checked by opening it (a file that did not exist is removed
/// again): found out before a run of several real minutes, not after.
fn check_writable(path: &Path, what: &'static str) -> Result<(), Failure> {
    if path == Path::new("-") {
        return if what == "JSON summary" {
            Ok(())
        } else {
            Err(Failure::Input(format!(
                "`-` for the {what}: standard output is for the JSON summary only (`--json -`); expected a file"
            )))
        };
    }
    let existed = path.exists();
    match std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
    {
        Ok(_) => {
            if !existed {
                let _ = std::fs::remove_file(path);
            }
            Ok(())
        }
        Err(source) => Err(Failure::Write {
            what,
            path: path.to_owned(),
            source,
        }),
    }
}

/// `--lease NAMESPACE/NAME` of `command`, as (namespace, name), or what was expected.
fn lease_arg<'a>(
    command: &str,
    lease: &'a str,
    example: &str,
) -> Result<(&'a str, &'a str), Failure> {
    lease
        .split_once('/')
        .filter(|(ns, n)| !ns.is_empty() && !n.is_empty() && !n.contains('/'))
        .ok_or_else(|| {
            Failure::Input(format!(
                "kubechaos {command}: --lease {lease}: expected NAMESPACE/NAME, for example {example}"
            ))
        })
}

/// A single-threaded Tokio runtime (children started from it get a parent-death signal tied to
/// this thread).
fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Failure::Runtime)
}

//! What each command does, thinly: read its flags, call the core and the engine, print, and end
//! in a [`Verdict`] or a [`Failure`] (which `main` turns into the exit code).

pub mod agent;
pub mod cluster;
pub mod files;
pub mod recover;
pub mod run;

use std::path::Path;

use crate::failure::{Failure, Verdict};

/// The end of every command.
pub type End = Result<Verdict, Failure>;

/// Write a file kubechaos produces.
fn write_file(path: &Path, content: &[u8], what: &'static str) -> Result<(), Failure> {
    std::fs::write(path, content).map_err(|source| Failure::Write {
        what,
        path: path.to_owned(),
        source,
    })
}

/// Whether `path` can be written, checked by opening it (a file that did not exist is removed
/// again): found out before a run of several real minutes, not after.
fn check_writable(path: &Path, what: &'static str) -> Result<(), Failure> {
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

/// A single-threaded Tokio runtime (children started from it get a parent-death signal tied to
/// this thread).
fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Failure::Runtime)
}

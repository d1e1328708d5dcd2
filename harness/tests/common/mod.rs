//! Helpers shared by the integration tests (each test file is its own crate and uses some).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The kubechaos binary, to be run from the repository's root with logs off.
pub fn kubechaos() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("kubechaos").unwrap();
    cmd.current_dir(repo())
        .env_remove("CARGO")
        .env("RUST_LOG", "off");
    cmd
}

/// `kubechaos scenario SCENARIO --backend BACKEND EXTRA...` from the repository's root: the
/// exit code, and stdout then stderr.
pub fn play_scenario(scenario: &Path, backend: &str, extra: &[&std::ffi::OsStr]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kubechaos"))
        .current_dir(repo())
        .env("RUST_LOG", "off")
        .arg("scenario")
        .arg(scenario)
        .args(["--backend", backend])
        .args(extra)
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// Processes whose command line mentions `needle`.
pub fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if !entry
            .file_name()
            .to_string_lossy()
            .chars()
            .all(|c| c.is_ascii_digit())
        {
            continue;
        }
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(needle) {
                found.push(cmdline);
            }
        }
    }
    found
}

pub fn wait_until_gone(needle: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let left = processes_mentioning(needle);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

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
    play_scenario_with(scenario, backend, extra, &[])
}

/// As [`play_scenario`], with extra environment (`TMPDIR`, to see what a run leaves behind).
pub fn play_scenario_with(
    scenario: &Path,
    backend: &str,
    extra: &[&std::ffi::OsStr],
    env: &[(&str, &std::ffi::OsStr)],
) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kubechaos"))
        .current_dir(repo())
        .env("RUST_LOG", "off")
        .envs(env.iter().copied())
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

/// `kubechaos scenario FILE --backend kube --kubeconfig KUBECONFIG`: the exit code, and stdout
/// then stderr.
pub fn play_on_kube(file: &Path, kubeconfig: &Path) -> (i32, String) {
    play_scenario(
        file,
        "kube",
        &[std::ffi::OsStr::new("--kubeconfig"), kubeconfig.as_os_str()],
    )
}

/// A stand-in for the docker CLI in `dir` that appends each call's arguments, a line each, to
/// `dir/docker.log` and then runs `then` (shell, `$*` the arguments). Returns the program and
/// the log.
pub fn docker_stand_in(dir: &Path, then: &str) -> (PathBuf, PathBuf) {
    let docker = dir.join("docker");
    let log = dir.join("docker.log");
    std::fs::write(
        &docker,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> {}\n{then}\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&docker, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    (docker, log)
}

/// `kubechaos scenario FILE --backend kube --kubeconfig KUBECONFIG --provider kind` with the
/// docker CLI `docker` (a stand-in: no kind cluster runs here): the exit code, and the output.
pub fn play_on_kind(file: &Path, kubeconfig: &Path, docker: &Path) -> (i32, String) {
    play_scenario_with(
        file,
        "kube",
        &[
            std::ffi::OsStr::new("--kubeconfig"),
            kubeconfig.as_os_str(),
            std::ffi::OsStr::new("--provider"),
            std::ffi::OsStr::new("kind"),
        ],
        &[("KUBECHAOS_DOCKER", docker.as_os_str())],
    )
}

/// Build the client-go fixture (`fixtures/agents/client-go`, a controller on client-go's
/// `leaderelection` package) into `dir`, with the machine's Go.
pub fn build_client_go_agent(dir: &Path) -> PathBuf {
    let bin = dir.join("client-go-agent");
    let out = Command::new("go")
        .current_dir(repo().join("fixtures/agents/client-go"))
        .env("CGO_ENABLED", "0")
        .args(["build", "-o"])
        .arg(&bin)
        .arg(".")
        .output()
        .expect("go is installed (ci/test checks)");
    assert!(
        out.status.success(),
        "building the client-go agent failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// Every core kept busy for as long as it lives: a busy loop per core, each a process of its
/// own at the default priority, as a CI runner's own build beside kubechaos (issue 36's
/// saturated machine).
pub struct Saturated {
    loops: Vec<std::process::Child>,
}

impl Saturated {
    /// One busy loop per core of this machine, started now.
    pub fn every_core() -> Saturated {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let loops = (0..cores)
            .map(|_| {
                Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .spawn()
                    .expect("sh")
            })
            .collect();
        Saturated { loops }
    }
}

impl Drop for Saturated {
    fn drop(&mut self) {
        for l in &mut self.loops {
            let _ = l.kill();
            let _ = l.wait();
        }
    }
}

/// `harness/tests/fixtures/evidence-at-source.yaml`: the correct reference agent through its
/// leader cut off, killed and an API outage, a real client-go program whose identity is its
/// pod's name, and a give-up one through the outage.
pub fn evidence_scenario() -> PathBuf {
    repo().join("harness/tests/fixtures/evidence-at-source.yaml")
}

/// For `--backend local`, where a pod's command runs on this machine: the client-go agent
/// (`fixtures/agents/client-go`) built into a directory of its own, and `PATH` with that
/// directory first, for kubechaos to run the pod `client-go-agent` of the evidence scenario
/// (on kind it is the image `ci/kind` loads). Keep the directory while the run lasts.
pub fn client_go_on_path() -> (tempfile::TempDir, std::ffi::OsString) {
    let dir = tempfile::tempdir().unwrap();
    build_client_go_agent(dir.path());
    let mut path = std::ffi::OsString::from(dir.path());
    if let Some(rest) = std::env::var_os("PATH") {
        path.push(":");
        path.push(rest);
    }
    (dir, path)
}

/// The verdicts that scenario gives on an idle machine, whatever the backend: every invariant
/// of the correct agent held, and of the client-go one whose identity is its pod's name (it
/// exits and its restarted container takes the Lease back under that name), the give-up one caught (exit 1)
/// and only it.
pub fn assert_evidence_verdicts(code: i32, text: &str) {
    let lock = "reference-agent/reference-agent-lock";
    let give_up = "reference-agent/give-up-lock";
    let pod_name = "reference-agent/pod-name-lock";
    let expected = [
        format!("PASS  leader-reacquired {lock}: held by reference-agent-"),
        format!("PASS  single-leader {lock}: never two leaders at once"),
        format!("PASS  valid-lease-while-leading {lock}: every leader's Lease named it"),
        format!("FAIL  leader-reacquired {give_up}: lease {give_up} was not re-acquired"),
        format!("PASS  single-leader {give_up}"),
        format!("PASS  leader-reacquired {pod_name}: held by pod-name-agent-"),
        format!("PASS  single-leader {pod_name}: never two leaders at once"),
        format!("PASS  valid-lease-while-leading {pod_name}: every leader's Lease named it"),
    ];
    let mut problems: Vec<String> = expected
        .iter()
        .filter(|e| !text.contains(e.as_str()))
        .map(|e| format!("expected {e:?}"))
        .collect();
    let passes = text
        .lines()
        .filter(|l| l.contains(&format!("PASS  leader-reacquired {lock}")))
        .count();
    if passes != 3 {
        problems.push(format!(
            "expected the 3 windows of {lock}'s leader-reacquired to pass, {passes} did"
        ));
    }
    // The client-go program did exit on its lost lease and its container was started again:
    // what its leader-reacquired pass is about.
    if !text
        .lines()
        .any(|l| l.contains("pod-name-agent-") && l.contains("(start #2)"))
    {
        problems.push("expected the pod-name agent's container to start a second time".into());
    }
    let fails: Vec<&str> = text.lines().filter(|l| l.contains("  FAIL  ")).collect();
    if fails.len() != 1 {
        problems.push(format!(
            "expected one FAIL (the give-up agent's), got {fails:?}"
        ));
    }
    if code != 1 {
        problems.push(format!(
            "expected exit 1 (the give-up agent caught), got {code}"
        ));
    }
    assert!(problems.is_empty(), "{}\n{text}", problems.join("\n"));
}

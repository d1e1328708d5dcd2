//! `kubechaos explore`: generated schedules find the first seed's bug in an agent that gives up,
//! shrink it to a small scenario file that replays it, and find nothing in a correct agent with
//! the same budget.

use std::path::PathBuf;

use assert_cmd::Command;
use predicates::prelude::*;

mod common;

use common::repo;

/// Explorations print their progress as plain lines, as in CI.
fn kubechaos() -> Command {
    let mut cmd = common::kubechaos();
    cmd.env("CI", "true");
    cmd
}

/// The budget of both explorations: small enough for CI, the same for both.
const BUDGET: &[&str] = &[
    "--runs",
    "16",
    "--max-faults",
    "3",
    "--seed",
    "3",
    "-j",
    "2",
];

#[test]
fn a_give_up_agent_is_found_shrunk_and_written_as_a_scenario_that_replays_it() {
    let out = tempfile::tempdir().unwrap();
    let run = kubechaos()
        .args(["explore", "agent-give-up"])
        .args(BUDGET)
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("FOUND  leader-reacquired default/agent-lock"),
        "{stdout}"
    );
    assert!(stderr.contains("explore: 16/16 runs"), "progress: {stderr}");
    let files: Vec<PathBuf> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "one file per violated invariant: {files:?}");
    let file = &files[0];
    let name = file.file_stem().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("agent-give-up-") && name.len() == "agent-give-up-".len() + 8,
        "{name}"
    );
    let text = std::fs::read_to_string(file).unwrap();
    assert!(text.starts_with("# Found by `kubechaos explore topologies/agent-give-up.yaml --runs 16 --seed 3 --max-faults 3`"), "{text}");
    assert!(
        text.contains(&format!(
            "# Replay: kubechaos scenario {} (its seed and step are in the file, `sim:`)",
            file.display()
        )),
        "{text}"
    );
    // Confirmed at the default step before it was written, and how robust it is said.
    assert!(
        text.contains("# It fails at the default step (10ms), at "),
        "{text}"
    );
    assert!(text.contains(" of 10 seeds (3–12)."), "{text}");
    assert!(text.trim_end().ends_with("sim: {seed: 3}"), "{text}");
    let steps: Vec<&str> = text
        .split("\nfaults:\n")
        .nth(1)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("  - "))
        .collect();
    assert!(
        (1..=2).contains(&steps.len()),
        "shrunk to one or two faults:\n{text}"
    );
    for step in steps {
        assert!(
            stdout.contains(&format!("\n  {step}\n")),
            "the summary shows the file's step {step}:\n{stdout}"
        );
    }
    assert!(
        stdout.contains(&format!(
            "replay: kubechaos scenario {} (its seed and step are in the file)",
            file.display()
        )),
        "{stdout}"
    );
    assert!(stdout.contains("  robustness: fails at "), "{stdout}");

    // An ordinary scenario file: it validates, and replays to the same violation as it is,
    // with its own seed (the header says so), in a suite too.
    kubechaos().arg("validate").arg(file).assert().code(0);
    kubechaos()
        .arg("scenario")
        .arg(file)
        .assert()
        .code(1)
        .stdout(predicate::str::contains(", seed 3\n"))
        .stdout(predicate::str::contains(
            "FAIL  leader-reacquired default/agent-lock",
        ));
    kubechaos()
        .arg("suite")
        .arg(out.path())
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "seed 1 or each file's own (`sim.seed`)",
        ));
    kubechaos()
        .arg("scenario")
        .arg(file)
        .args(["--seed", "3", "--tick-ms", "100"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "FAIL  leader-reacquired default/agent-lock",
        ))
        .stdout(predicate::str::contains(
            "PASS  single-leader default/agent-lock",
        ));
}

#[test]
fn a_correct_agent_gives_nothing_with_the_same_budget() {
    let out = tempfile::tempdir().unwrap();
    kubechaos()
        .args(["explore", "agent-correct"])
        .args(BUDGET)
        .arg("--out")
        .arg(out.path())
        .assert()
        .code(0)
        .stdout(predicate::str::contains("16 run(s) in"))
        .stdout(predicate::str::contains(": 0 violated an invariant"))
        .stdout(predicate::str::contains("nothing found"));
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
}

#[test]
fn a_shard_runs_its_part_of_the_cases_and_bad_input_is_exit_2() {
    let out = tempfile::tempdir().unwrap();
    kubechaos()
        .args([
            "explore",
            "agent-correct",
            "--runs",
            "5",
            "--shard",
            "1/2",
            "-j",
            "1",
        ])
        .arg("--out")
        .arg(out.path())
        .assert()
        .code(0)
        .stdout(predicate::str::contains("2 run(s) (shard 1/2 of 5)"));
    kubechaos()
        .args(["explore", "agent-correct", "--shard", "2/2"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("expected 0 <= I < N"));
    kubechaos()
        .args(["explore", "no-such-topology"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "looked for topologies/no-such-topology.yaml",
        ));
    // Findings that could not be written are said before the exploration, not at the first
    // finding; a directory made for them is removed again when nothing was found.
    let file = out.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let refused = kubechaos()
        .args(["explore", "agent-correct", "--runs", "2", "--out"])
        .arg(file.join("found"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("a-file/found: its findings could not be written there"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("explore: 1/2 runs"),
        "it explored: {stderr}"
    );
    let deeper = out.path().join("made").join("for-it");
    kubechaos()
        .args(["explore", "agent-correct", "--runs", "2", "--out"])
        .arg(&deeper)
        .assert()
        .code(0)
        .stdout(predicate::str::contains("nothing found"));
    assert!(!out.path().join("made").exists(), "left: {deeper:?}");
    // A topology whose invariants wait for a step id cannot take generated faults.
    kubechaos()
        .args(["explore", "harness/tests/fixtures/kube-generic.yaml"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("anchored with `after:`"));
}

/// Explorations step the sim 100 ms at a time: every shipped scenario and every trap must keep
/// each invariant's verdict at that step.
#[test]
fn the_exploration_step_keeps_every_shipped_verdict() {
    use kubechaos_engine::backend::sim::{Sim, SimOptions};
    use kubechaos_engine::run::run;
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("scenarios"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    for trap in [
        "trap-schedulers",
        "trap-controller-managers",
        "trap-both",
        "never-schedulable",
    ] {
        files.push(repo().join(format!("harness/tests/fixtures/{trap}.yaml")));
    }
    files.sort();
    for f in files {
        let s = kubechaos_core::scenario::load(&f).unwrap();
        let verdicts = |tick_ms: u64| -> Vec<(String, bool)> {
            let mut sim = Sim::new(SimOptions {
                tick: std::time::Duration::from_millis(tick_ms),
                ..SimOptions::default()
            });
            run(&s, &mut sim, &mut |_: &str| {})
                .unwrap()
                .verdicts
                .into_iter()
                .map(|v| (v.label, v.held))
                .collect()
        };
        assert_eq!(
            verdicts(kubechaos_engine::explore::TICK_MS),
            verdicts(kubechaos_engine::backend::sim::DEFAULT_TICK_MS),
            "{}",
            f.display()
        );
    }
}

/// Simulation finds, reality confirms: with `--confirm local` the give-up agent's finding is
/// replayed on the local control plane (the real reference agent in `give-up` mode against
/// upstream's kube-apiserver), where the same invariant fails; the report and the file say it
/// is confirmed.
#[test]
#[ignore = "real tier: a local control plane (root, the pinned upstream binaries); ci/test runs it"]
fn a_finding_is_confirmed_on_the_local_control_plane() {
    let out = tempfile::tempdir().unwrap();
    let run = kubechaos()
        .args(["explore", "agent-give-up"])
        .args(BUDGET)
        .arg("--out")
        .arg(out.path())
        .args(["--confirm", "local"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("CONFIRM  "), "{stdout}");
    assert!(
        stdout.contains("on local: confirmed: `leader-reacquired default/agent-lock` failed on the local control plane too"),
        "{stdout}\n{stderr}"
    );
    let files: Vec<PathBuf> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(
        text.contains("\n# `--confirm local`: confirmed: `leader-reacquired default/agent-lock` failed on the local control plane too.\n"),
        "{text}"
    );
    // The file still plays as written.
    common::kubechaos()
        .args(["scenario", files[0].to_str().unwrap()])
        .assert()
        .code(1);
}

/// `--confirm local` on a topology the local backend cannot run is refused before anything is
/// explored (exit 2, saying why).
#[test]
fn confirm_local_refuses_a_topology_local_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ha.yaml");
    std::fs::write(
        &file,
        // Read errors: the local backend fails requests through admission, which sees writes only.
        "name: ha\ncluster:\n  nodes: 1\n  components: {kube-scheduler: {replicas: 2}}\nfaults:\n  - {at: 5s, for: 10s, api-errors: {status: 500, ratio: 0.5, verbs: [get], resources: [leases]}}\nexpect:\n  - single-leader: {lease: kube-system/kube-scheduler}\nduration: 2m\n",
    )
    .unwrap();
    kubechaos()
        .args([
            "explore",
            file.to_str().unwrap(),
            "--runs",
            "2",
            "--confirm",
            "local",
        ])
        .arg("--out")
        .arg(dir.path().join("found"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--confirm local: "))
        .stderr(predicate::str::contains("ha.yaml:6:5: `api-errors` on get"))
        .stderr(predicate::str::contains("cannot run on the local backend"));
    assert!(!dir.path().join("found").exists());
}

//! The command line, as users meet it: exit codes, messages, files written.

use std::path::Path;

use assert_cmd::Command;
use predicates::prelude::*;

mod common;

use common::{kubechaos, repo};

fn fixture(name: &str) -> String {
    format!("harness/tests/fixtures/{name}")
}

#[test]
fn api_restart_holds_on_the_sim_by_default() {
    kubechaos()
        .args(["scenario", "api-restart"])
        .assert()
        .code(0)
        .stdout(predicate::str::contains("on sim, seed 1"))
        .stdout(predicate::str::contains("fault     api-server: stop"))
        .stdout(predicate::str::contains(
            "PASS  leader-reacquired kube-system/kube-scheduler",
        ))
        .stdout(predicate::str::contains("6 held, 0 violated"));
}

#[test]
fn every_shipped_scenario_holds() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("scenarios/")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|f| f.strip_suffix(".yaml").map(str::to_owned))
        .collect();
    names.sort();
    assert!(names.len() >= 9, "shipped scenarios: {names:?}");
    for name in names {
        kubechaos()
            .args(["scenario", &name])
            .assert()
            .code(0)
            .stdout(predicate::str::contains(" 0 violated"));
    }
}

/// A `bind` step binds a pending pod as a scheduler would, and refuses a bound one.
#[test]
fn a_bind_step_binds_a_pending_pod() {
    kubechaos()
        .args(["scenario", &fixture("bind-step.yaml")])
        .assert()
        .code(0)
        .stdout(predicate::str::contains(
            "bind: bound pod kubechaos/probe-1 to node-1",
        ))
        .stdout(predicate::str::contains("kubechaos/probe-1 -> node-1"))
        .stdout(predicate::str::contains(
            "bind: refused: pod kubechaos/probe-1 is already bound to node-1",
        ))
        .stdout(predicate::str::contains("2 held, 0 violated"));
}

/// The disaster-recovery trap is real: without the recovery step (or with the scheduler
/// recovered but not the controller-manager) the self-hosted cluster does not come back.
#[test]
fn the_self_hosted_traps_fail_without_their_recovery() {
    let cases: [(&str, &[&str]); 3] = [
        (
            "trap-schedulers.yaml",
            &[
                "PASS  unschedulable",
                "FAIL  schedulable: probe pod kubechaos/probe-1",
                "no scheduler bound it",
                "FAIL  available kube-system/kube-scheduler",
            ],
        ),
        (
            "trap-controller-managers.yaml",
            &[
                "FAIL  available kube-system/kube-controller-manager",
                "FAIL  leader-reacquired kube-system/kube-controller-manager",
                "no candidate was running",
            ],
        ),
        (
            "trap-both.yaml",
            &[
                "PASS  schedulable",
                "FAIL  available kube-system/kube-controller-manager",
                "FAIL  available kube-system/kube-scheduler",
                "a status ahead of the pods is stale",
            ],
        ),
    ];
    for (file, expected) in cases {
        let mut a = kubechaos()
            .args(["scenario", &fixture(file)])
            .assert()
            .code(1);
        for e in expected {
            a = a.stdout(predicate::str::contains(*e));
        }
    }
}

/// A trap for each degradation fault fails on the sim, each violation saying what kept the
/// Lease from being taken: a lossy link or Lease updates answered with 500 still in effect, or
/// (after a slow link) the candidate still waiting out the lease from its first read.
#[test]
fn the_degradation_traps_fail_and_say_what_held_the_lease_back() {
    let cases: [(&str, &[&str]); 3] = [
        (
            "trap-slow-api-server.yaml",
            &[
                "FAIL  leader-reacquired kube-system/kube-scheduler",
                // Its first read after the delay starts client-go's wait of a lease duration.
                "kube-scheduler-0 (until 1m1",
                "was still waiting out the lease as client-go does",
                "PASS  single-leader",
            ],
        ),
        (
            "trap-lossy-link.yaml",
            &[
                "FAIL  leader-reacquired kube-system/kube-scheduler",
                "was held back by `loss: {between: [kube-scheduler, api-server], ratio: 0.99}`",
            ],
        ),
        (
            "trap-lease-update-errors.yaml",
            &[
                "FAIL  leader-reacquired kube-system/kube-scheduler",
                "kube-scheduler-0, kube-scheduler-1 were held back by `api-errors: {status: 500, ratio: 1, verbs: [update], resources: [leases], users: [system:kube-scheduler]}`",
            ],
        ),
    ];
    for (file, expected) in cases {
        for seed in ["1", "2", "3"] {
            let mut a = kubechaos()
                .args(["scenario", &fixture(file), "--seed", seed])
                .assert()
                .code(1);
            for e in expected {
                a = a.stdout(predicate::str::contains(*e));
            }
        }
    }
}

/// Several API servers and etcd members on the sim: a lost quorum stops every write until it
/// returns, and an API server cut off from etcd takes down the leaders whose connections land
/// on it while the other replicas take over; each passes as written and its trap fails, saying
/// what held the Lease back.
#[test]
fn api_servers_and_etcd_members_fail_and_recover_on_the_sim() {
    for (file, expected) in [
        (
            "etcd-quorum-loss",
            &[
                // Nothing could be written while the quorum was lost: the probe pod itself was
                // created only once it was back, and the verdict says so.
                "PASS  unschedulable: probe pod kubechaos/probe-0 (created at ",
                ": not accepted by the API server until then) stayed unbound",
                "6 held, 0 violated",
                "start: etcd/1 (undoing `remove: etcd/1`",
            ][..],
        ),
        (
            "api-server-cut-from-etcd",
            &[
                "cluster: 2 nodes, api-server ×3, etcd ×3",
                "[api-server-0 <-> etcd-0, api-server-0 <-> etcd-1, api-server-0 <-> etcd-2]",
                // As written (seed 4) the leaders are behind api-server-0; replicas behind the
                // others take over.
                "kube-scheduler-0: exited: leaderelection lost",
                "kube-controller-manager-0: exited: leaderelection lost",
                "kube-system/kube-scheduler: held by kube-scheduler-",
                "5 held, 0 violated",
            ],
        ),
    ] {
        // A shipped scenario by its name, a fixture by its file.
        let file = if file.ends_with(".yaml") {
            fixture(file)
        } else {
            file.to_owned()
        };
        let mut a = kubechaos().args(["scenario", &file]).assert().code(0);
        for e in expected {
            a = a.stdout(predicate::str::contains(*e));
        }
        // Whoever leads at other seeds, every invariant holds.
        for seed in ["1", "2", "3"] {
            kubechaos()
                .args(["scenario", &file, "--seed", seed])
                .assert()
                .code(0)
                .stdout(predicate::str::contains(" 0 violated"));
        }
    }
    for (file, expected) in [
        (
            "trap-etcd-quorum-loss.yaml",
            "kube-scheduler-0, kube-scheduler-1 were held back by `remove: etcd/1`, still in effect",
        ),
        (
            "trap-api-server-cut-from-etcd.yaml",
            "kube-scheduler-0 was held back by `partition: [api-server/0, etcd]`, still in effect",
        ),
    ] {
        kubechaos()
            .args(["scenario", &fixture(file)])
            .assert()
            .code(1)
            .stdout(predicate::str::contains(expected));
    }
}

/// Topologies that mean nothing are refused at their position: an even etcd, an API server or
/// member the cluster does not have, a leader of one member or of API servers; and what a
/// backend cannot do yet is refused before the run.
#[test]
fn bad_topologies_and_their_targets_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let f = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&f, format!("name: {name}\n{text}")).unwrap();
        f.to_str().unwrap().to_owned()
    };
    let even = write("even", "cluster: {etcd: {members: 2}}\n");
    kubechaos()
        .args(["validate", &even])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "even.yaml:2:27: `cluster.etcd.members` is 2; expected an odd number (1, 3, 5 or 7)",
        ));
    let targets = write(
        "targets",
        "cluster: {api-servers: 3, components: {kube-scheduler: {replicas: 1}}}\nfaults:\n  - {at: 1s, kill: api-server/3}\n  - {at: 2s, remove: etcd/leader}\n  - {at: 3s, kill: etcd/1}\n",
    );
    kubechaos()
        .args(["validate", &targets])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("targets.yaml:4:20: target `api-server/3`: replica 3 does not exist; expected 0 to 2 (replicas count from 0); the cluster runs 3 API servers"))
        .stderr(predicate::str::contains("targets.yaml:5:22: target `etcd/leader`: a one-member etcd has no raft election to lead"))
        .stderr(predicate::str::contains("targets.yaml:6:20: target `etcd/1`: replica 1 does not exist"));
    let leader = write("leader", "faults:\n  - {at: 1s, kill: api-server/leader}\n");
    kubechaos()
        .args(["validate", &leader])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "`api-server/leader`: API servers do not elect a leader",
        ));
    let ha = write(
        "ha",
        "cluster: {api-servers: 3, etcd: {members: 3}}\nfaults:\n  - {at: 1s, partition: [etcd/0, etcd/1], for: 5s}\n",
    );
    for (backend, expected) in [
        ("sim", "between etcd members: the sim does not model raft's traffic between members"),
        ("local", "between etcd members: the local backend carries only the API server's traffic to each member"),
        ("kube", "ha.yaml:4:5: `partition: [etcd/0, etcd/1]`: between etcd members: kubechaos cuts raft's traffic between members on no backend"),
    ] {
        kubechaos()
            .args(["validate", &ha, "--backend", backend])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(expected));
    }
}

/// The JSON summary of `scenario` played on the sim at `seed`.
fn summary_at(scenario: &str, seed: u64) -> serde_json::Value {
    let out = kubechaos()
        .args([
            "scenario",
            scenario,
            "--seed",
            &seed.to_string(),
            "--json",
            "-",
        ])
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The sim and the local control plane once disagreed on how soon a waiting scheduler takes
/// the Lease after an API-server outage: at once when its last read before the outage saw the
/// leader's last renewal, a full lease duration after its first read otherwise. On the local
/// control plane the quick takeover came in 1 of 9 runs; on the sim in 20 of 40 seeds, until its
/// time zero, the components' start-up and the renew period were made as upstream's (see
/// docs/benchmarks.md). Pinned here: across 20 seeds the quick takeover is the exception, and
/// both outcomes happen.
#[test]
fn the_quick_takeover_after_an_outage_is_the_exception() {
    let mut quick = 0;
    let mut slow = 0;
    for seed in 1..=20 {
        let summary = summary_at(&fixture("takeover-after-outage.yaml"), seed);
        let took = summary["scenarios"][0]["invariants"][0]["took_ms"]
            .as_u64()
            .unwrap_or_else(|| panic!("seed {seed}: not re-acquired: {summary}"));
        if took < 5_000 {
            quick += 1;
        } else {
            assert!(
                took > 15_000,
                "seed {seed}: {took} ms, neither at once nor after a lease duration"
            );
            slow += 1;
        }
    }
    assert!(
        quick >= 1 && quick * 4 <= quick + slow,
        "{quick} quick, {slow} after a lease duration"
    );
}

/// Fidelity, measured: the figures `ci/fidelity` recorded (docs/fidelity.json) are the sim's
/// figures now, at the first three of its seeds (the table is current: a model change that moves
/// them must measure again, `ci/fidelity --sim-only`), and the sim's median (over all its seeds)
/// is within 2 s of the local control plane's, or the row says why not. Every shipped scenario
/// has its rows.
#[test]
fn the_sim_agrees_with_the_measured_local_figures() {
    let text = std::fs::read_to_string(repo().join("docs/fidelity.json"))
        .expect("docs/fidelity.json: run ci/fidelity");
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let tolerance = doc["tolerance_ms"].as_u64().unwrap();
    let replayed = doc["sim_seeds"].as_u64().unwrap().min(3);
    let rows = doc["rows"].as_array().unwrap();
    let mut scenarios: Vec<String> = rows
        .iter()
        .map(|r| r["scenario"].as_str().unwrap().to_owned())
        .collect();
    scenarios.dedup();
    let shipped: std::collections::BTreeSet<String> = std::fs::read_dir(repo().join("scenarios"))
        .unwrap()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".yaml")
                .map(str::to_owned)
        })
        .collect();
    let measured: std::collections::BTreeSet<String> = scenarios.iter().cloned().collect();
    assert_eq!(
        measured, shipped,
        "every shipped scenario is measured: run ci/fidelity"
    );
    for scenario in &scenarios {
        // Each invariant's figure (by its position in `expect:`) at seeds 1 to `replayed`, now.
        let mut now: std::collections::BTreeMap<u64, Vec<Option<u64>>> = Default::default();
        for seed in 1..=replayed {
            let summary = summary_at(scenario, seed);
            for (index, i) in summary["scenarios"][0]["invariants"]
                .as_array()
                .unwrap()
                .iter()
                .enumerate()
            {
                now.entry(index as u64)
                    .or_default()
                    .push(i["took_ms"].as_u64());
            }
        }
        for row in rows.iter().filter(|r| r["scenario"] == scenario.as_str()) {
            let label = row["invariant"].as_str().unwrap();
            let index = row["index"].as_u64().unwrap();
            let recorded: Vec<Option<u64>> = row["sim_ms"]
                .as_array()
                .unwrap()
                .iter()
                .take(replayed as usize)
                .map(|m| m.as_u64())
                .collect();
            assert_eq!(
                now.get(&index),
                Some(&recorded),
                "{scenario} {label}: the sim's figures moved since ci/fidelity measured them: run ci/fidelity --sim-only (or all of it)"
            );
            if row.get("why").is_some() {
                continue;
            }
            let (sim, local) = (
                row["sim_median_ms"].as_f64(),
                row["local_median_ms"].as_f64(),
            );
            let (Some(sim), Some(local)) = (sim, local) else {
                panic!("{scenario} {label}: no median on one side (sim {sim:?}, local {local:?}) and no `why`");
            };
            assert!(
                (sim - local).abs() <= tolerance as f64,
                "{scenario} {label}: sim median {sim} ms, local median {local} ms: more than {tolerance} ms apart; mend the model or say why in docs/fidelity.json"
            );
        }
    }
}

/// A degradation fault that the backend cannot carry out honestly is refused before the run:
/// reads cannot be failed through admission on local, and the kube backend refuses delays,
/// losses and API errors.
#[test]
fn degradation_faults_a_backend_cannot_do_are_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("reads.yaml");
    std::fs::write(
        &file,
        "name: reads\ncluster: {nodes: 1, components: {kube-scheduler: {replicas: 1}}}\nfaults:\n  - {at: 1s, for: 5s, api-errors: {status: 500, verbs: [get, update]}}\n  - {at: 2s, for: 5s, delay: {from: kube-scheduler, to: api-server, latency: 1s}}\n",
    )
    .unwrap();
    kubechaos()
        .args(["validate", file.to_str().unwrap(), "--backend", "local"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("reads.yaml:4:5: `api-errors` on get: the local backend makes the real API server answer with errors through an admission webhook, and admission sees writes only"));
    kubechaos()
        .args(["validate", file.to_str().unwrap(), "--backend", "kube"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("reads.yaml:4:5: `api-errors: {status: 500, ratio: 1, verbs: [get, update]}`: the kube backend cannot make an existing cluster's API server answer with errors"))
        .stderr(predicate::str::contains("reads.yaml:5:5: `delay: {from: kube-scheduler, to: api-server, latency: 1s}`: `delay` needs a delaying proxy"));
    kubechaos()
        .args(["validate", file.to_str().unwrap()])
        .assert()
        .code(0);
}

#[test]
fn a_violation_exits_1_names_the_lease_and_prints_the_replay_command() {
    kubechaos()
        .args(["scenario", &fixture("never-schedulable.yaml"), "--seed", "5"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("FAIL  schedulable: probe pod kubechaos/probe-0"))
        .stdout(predicate::str::contains("never bound to a node"))
        .stdout(predicate::str::contains(
            "lease kube-system/kube-scheduler was not re-acquired within 1m of the anchor at 20.0s (deadline 1m20.0s): last holder kube-scheduler-",
        ))
        .stdout(predicate::str::contains("no candidate was running"))
        .stdout(predicate::str::contains("replay: kubechaos scenario harness/tests/fixtures/never-schedulable.yaml --seed 5"));
}

#[test]
fn every_decode_error_is_reported_with_its_position() {
    let path = fixture("decode-errors.yaml");
    let out = kubechaos()
        .args(["validate", &path])
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8(out).unwrap();
    for expected in [
        ":1:7: name `Bad_Name` is not a valid name",
        ":7:9: `at` is the number 20 without a unit; expected a duration like `20s`",
        ":10:11: `kill`: unknown target `kube-schedular/0` (did you mean `kube-scheduler`?)",
        ":12:5: unknown key `fro` in a fault step (did you mean `for`?)",
        ":14:9: `at`: `x` in `1x` is not a unit",
        ":15:17: `api-server: reboot` is unknown; expected `stop`, `start`, `restart` or `crash`",
        ":17:60: unknown key `withinn` in `leader-reacquired` (did you mean `within`?)",
    ] {
        assert!(
            err.contains(&format!("{path}{expected}")),
            "missing {expected:?} in:\n{err}"
        );
    }
    assert!(err.contains("\n8 problems\n"), "the count is said: {err}");
}

#[test]
fn every_semantic_error_is_reported_with_its_position() {
    let path = fixture("semantic-errors.yaml");
    let out = kubechaos()
        .args(["scenario", &path])
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8(out).unwrap();
    for expected in [
        ":8:17: target `kube-scheduler/5`: replica 5 does not exist; expected 0 to 1",
        ":10:11: target `agent/ghost`: no agent group `ghost`",
        ":12:11: target `kube-controller-manager`: the cluster runs no kube-controller-manager",
        ":13:5: fault `api-server: stop` is at 5m, past the run's end at 2m",
        ":16:5: `leader-reacquired` judges lease `default/nobody`, which no component or agent holds",
        ":17:5: `after: no-such-step` names no step",
    ] {
        assert!(err.contains(&format!("{path}{expected}")), "missing {expected:?} in:\n{err}");
    }
}

#[test]
fn hostile_yaml_gets_an_error_not_a_hang() {
    for (file, expected) in [
        ("alias-bomb.yaml", "too large once its aliases are expanded"),
        ("deep-nesting.yaml", "recursion limit exceeded"),
        ("binary.yaml", "not UTF-8 text"),
    ] {
        kubechaos()
            .args(["validate", &fixture(file)])
            .timeout(std::time::Duration::from_secs(20))
            .assert()
            .code(2)
            .stderr(predicate::str::contains(expected));
    }
    let dir = tempfile::tempdir().unwrap();
    let huge = dir.path().join("huge.yaml");
    std::fs::write(&huge, "a".repeat(2 << 20)).unwrap();
    kubechaos()
        .args(["validate", huge.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "huge.yaml:1:1: the file is larger than 1048576 bytes",
        ));
    let nul = dir.path().join("nul.yaml");
    std::fs::write(&nul, "name: x\n\0\n").unwrap();
    kubechaos()
        .args(["validate", nul.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "nul.yaml:2:1: the file holds binary data (a NUL byte)",
        ));
}

#[test]
fn what_the_sim_cannot_do_is_exit_2_before_anything_runs() {
    kubechaos()
        .args(["scenario", &fixture("sim-unsupported.yaml")])
        .assert()
        .code(2)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains(
            "sim-unsupported.yaml:7:5: `recover.pod-from: kube-system/deployment/kube-scheduler`: the sim backend's cluster has Deployments only with `cluster.self-hosted: true`",
        ))
        .stderr(predicate::str::contains(
            "sim-unsupported.yaml:10:11: target `node/node-7`",
        ));
    kubechaos()
        .args([
            "validate",
            &fixture("sim-unsupported.yaml"),
            "--backend",
            "sim",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "sim-unsupported.yaml:7:5: `recover.pod-from",
        ));
    // Without --backend, a file is valid when some backend can run it, and says which.
    kubechaos()
        .args(["validate", &fixture("sim-unsupported.yaml")])
        .assert()
        .code(0)
        .stdout(predicate::str::contains("; runs on kube)"));
    // A self-hosted cluster: its components are pods (no process to kill), it has only its
    // components' Deployments, and only its nodes.
    for backend in ["sim", "local"] {
        kubechaos()
            .args(["scenario", &fixture("self-hosted-unsupported.yaml"), "--backend", backend])
            .assert()
            .code(2)
            .stdout(predicate::str::is_empty())
            .stderr(predicate::str::contains(
                "self-hosted-unsupported.yaml:10:11: target `kube-scheduler/1`: in a self-hosted cluster kube-scheduler runs as the pods of a Deployment in kube-system: its pods have no fixed replica numbers",
            ))
            .stderr(predicate::str::contains(format!(
                "self-hosted-unsupported.yaml:11:5: `recover.pod-from: kube-system/deployment/kube-proxy`: the {backend} backend's cluster has kube-system/kube-scheduler and kube-system/kube-controller-manager; expected one of those"
            )))
            .stderr(predicate::str::contains(format!(
                "self-hosted-unsupported.yaml:11:5: `recover` to node `node-5`: the {backend} backend's nodes are node-0 … node-1"
            )))
            .stderr(predicate::str::contains(
                "self-hosted-unsupported.yaml:14:5: `available: {deployment: default/web}`",
            ));
    }
}

/// Found by `kubechaos explore` on the control-plane topology: an instant API-server restart
/// right before a probe pod is created. The sim's watch lost what happened between two watches;
/// now it holds, as it does upstream.
#[test]
fn an_instant_api_restart_found_by_explore_holds() {
    kubechaos()
        .args([
            "scenario",
            &fixture("control-plane-a1fb329d.yaml"),
            "--seed",
            "1",
        ])
        .assert()
        .code(0)
        .stdout(predicate::str::contains(
            "PASS  schedulable: probe pod kubechaos/probe-3",
        ));
}

#[test]
fn bad_flags_and_missing_scenarios_are_exit_2() {
    kubechaos()
        .args(["scenario", "api-restart", "--seed", "x"])
        .assert()
        .code(2);
    kubechaos()
        .args(["scenario", "api-restart", "--backend", "mars"])
        .assert()
        .code(2);
    kubechaos()
        .args(["scenario", "no-such-scenario"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "no scenario `no-such-scenario`: looked for scenarios/no-such-scenario.yaml",
        ));
    kubechaos().args(["validate"]).assert().code(2);
}

#[test]
fn an_unwritable_output_is_an_environment_failure() {
    kubechaos()
        .args([
            "scenario",
            "controller-manager-crash",
            "--events",
            "/nonexistent-dir/events.jsonl",
        ])
        .assert()
        .code(3)
        .stderr(predicate::str::contains(
            "cannot write the events to /nonexistent-dir/events.jsonl",
        ));
}

#[test]
fn same_seed_same_events_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let run = |seed: &str, name: &str| {
        let path = dir.path().join(name);
        kubechaos()
            .args([
                "scenario",
                "scheduler-leader-partition",
                "--seed",
                seed,
                "--events",
                path.to_str().unwrap(),
            ])
            .assert()
            .code(0);
        std::fs::read(path).unwrap()
    };
    let a = run("7", "a.jsonl");
    let b = run("7", "b.jsonl");
    let c = run("8", "c.jsonl");
    assert!(!a.is_empty());
    assert_eq!(a, b, "the same seed must give a byte-identical events file");
    assert_ne!(a, c, "another seed must give another run");
}

#[test]
fn junit_has_one_testcase_per_invariant_and_the_violation_as_failure() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("junit.xml");
    kubechaos()
        .args([
            "scenario",
            &fixture("never-schedulable.yaml"),
            "--junit",
            junit.to_str().unwrap(),
        ])
        .assert()
        .code(1);
    let xml = std::fs::read_to_string(junit).unwrap();
    assert_eq!(xml.matches("<testcase ").count(), 2, "{xml}");
    assert!(
        xml.contains("tests=\"2\"") && xml.contains("failures=\"2\""),
        "{xml}"
    );
    assert!(
        xml.contains("<failure message=\"probe pod kubechaos/probe-0"),
        "{xml}"
    );
}

#[test]
fn scenario_json_summary_names_each_verdict_and_the_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("summary.json");
    kubechaos()
        .args(["scenario", &fixture("never-schedulable.yaml"), "--json"])
        .arg(&json)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("json: "));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    assert_eq!(v["exit_code"], 1);
    assert_eq!(v["backend"], "sim");
    let s = &v["scenarios"][0];
    assert_eq!(s["result"], "violated");
    assert_eq!(s["invariants"].as_array().unwrap().len(), 2);
    assert_eq!(s["invariants"][0]["held"], false);
}

/// `suite` plays every file and writes one report: a testsuite per scenario, the events files
/// named in them, a JSON summary; exit 1 when any invariant was violated.
#[test]
fn a_suite_plays_every_file_and_writes_one_report() {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("scenarios");
    std::fs::create_dir(&files).unwrap();
    for (from, to) in [
        (
            "scenarios/controller-manager-crash.yaml",
            "controller-manager-crash.yaml",
        ),
        (
            "harness/tests/fixtures/never-schedulable.yaml",
            "never-schedulable.yaml",
        ),
    ] {
        std::fs::copy(repo().join(from), files.join(to)).unwrap();
    }
    let (junit, json, markdown, events, reports) = (
        dir.path().join("junit.xml"),
        dir.path().join("summary.json"),
        dir.path().join("summary.md"),
        dir.path().join("events"),
        dir.path().join("html"),
    );
    kubechaos()
        .arg("suite")
        .arg(&files)
        .arg("--junit")
        .arg(&junit)
        .arg("--json")
        .arg(&json)
        .arg("--markdown")
        .arg(&markdown)
        .arg("--events-dir")
        .arg(&events)
        .arg("--report-dir")
        .arg(&reports)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("PASS  controller-manager-crash"))
        .stdout(predicate::str::contains("FAIL  never-schedulable"))
        .stdout(predicate::str::contains(
            "suite: 2 scenario(s): 1 held, 1 violated, 0 could not run",
        ));
    // The Markdown table: the counts, then one row per invariant, the violated one marked.
    let table = std::fs::read_to_string(markdown).unwrap();
    assert!(
        table.starts_with(
            "### kubechaos: 2 scenario(s) on sim, seed 1: 1 held, 1 violated, 0 could not run\n"
        ),
        "{table}"
    );
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| ")).collect();
    assert!(rows
        .iter()
        .any(|r| r.starts_with("| **FAIL** | never-schedulable | schedulable |")));
    assert!(rows
        .iter()
        .any(|r| r.starts_with("| PASS | controller-manager-crash | leader-reacquired ")));
    assert!(
        rows.iter().all(|r| r.matches(" | ").count() == 3),
        "{table}"
    );
    assert!(table.contains("never-schedulable.html"), "{table}");
    let xml = std::fs::read_to_string(junit).unwrap();
    assert_eq!(xml.matches("<testsuite ").count(), 2, "{xml}");
    assert!(xml.contains("controller-manager-crash (sim)"), "{xml}");
    assert!(
        xml.contains("events.jsonl") || xml.contains("never-schedulable.jsonl"),
        "{xml}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    assert_eq!(v["exit_code"], 1);
    let results: Vec<&str> = v["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["result"].as_str().unwrap())
        .collect();
    assert_eq!(results, ["held", "violated"]);
    for name in ["controller-manager-crash", "never-schedulable"] {
        let text = std::fs::read_to_string(events.join(format!("{name}.jsonl"))).unwrap();
        assert!(text.contains("\"event\":\"run-ended\""), "{name}");
        assert!(text.contains("\"event\":\"invariant-judged\""), "{name}");
        let page = std::fs::read_to_string(reports.join(format!("{name}.html"))).unwrap();
        assert!(
            page.contains(&format!("<title>kubechaos: {name} on sim")),
            "{name}"
        );
        let report = v["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()["report"]
            .as_str()
            .unwrap();
        assert!(report.ends_with(&format!("{name}.html")), "{report}");
    }
    assert!(xml.contains("report: "), "{xml}");
}

/// The kube backend's safety guard refuses a context that does not look disposable before it
/// reads anything from the cluster; `--dry-run` prints the plan and touches nothing.
#[test]
fn the_kube_backend_refuses_contexts_that_do_not_look_disposable() {
    let dir = tempfile::tempdir().unwrap();
    // A cluster nobody listens for: the guard must decide before any connection.
    let kubeconfig = unreachable_kubeconfig(dir.path());
    let run =
        |extra: &[&str]| kube_scenario(&fixture("kube-generic.yaml"), &kubeconfig, extra).assert();
    run(&[]).code(2).stderr(predicate::str::contains(
        "refusing to touch context `prod-eu-1`: it does not look disposable",
    ));
    run(&["--context", "staging"]).code(2);
    run(&["--context", "kind-chaos", "--dry-run"])
        .code(0)
        .stdout(predicate::str::contains(
            "context kind-chaos: the plan (nothing is touched)",
        ))
        .stdout(predicate::str::contains(
            "via the API: DELETE the pods in kubechaos matching",
        ));
    run(&["--allow-context", "prod-eu-1", "--dry-run"]).code(0);
    // Or named once in kubechaos's configuration file (`--config`, or $KUBECHAOS_CONFIG).
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "allow-contexts: [prod-eu-1]\n").unwrap();
    run(&["--config", config.to_str().unwrap(), "--dry-run"]).code(0);
    kube_scenario(&fixture("kube-generic.yaml"), &kubeconfig, &["--dry-run"])
        .env("KUBECHAOS_CONFIG", &config)
        .assert()
        .code(0);
    std::fs::write(&config, "allow-contexts: prod-eu-1\nretries: 3\n").unwrap();
    run(&["--config", config.to_str().unwrap(), "--dry-run"])
        .code(2)
        .stderr(predicate::str::contains(format!("{}:1:", config.display())))
        .stderr(predicate::str::contains(
            "expected `allow-contexts: [NAME, ...]`",
        ));
    // Allowed, but nothing answers there: the environment failed (exit 3).
    run(&["--context", "kind-chaos"])
        .code(3)
        .stderr(predicate::str::contains(
            "cannot reach the cluster's API server",
        ));
}

/// `kubechaos scenario FILE --backend kube --kubeconfig KUBECONFIG EXTRA...`.
fn kube_scenario(file: &str, kubeconfig: &Path, extra: &[&str]) -> Command {
    let mut c = kubechaos();
    c.args(["scenario", file, "--backend", "kube"])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(extra);
    c
}

/// A throwaway kubeconfig whose cluster nobody listens for, with the contexts the tests name.
fn unreachable_kubeconfig(dir: &std::path::Path) -> std::path::PathBuf {
    let kubeconfig = dir.join("kubeconfig");
    let contexts: String = ["prod-eu-1", "kind-chaos", "k3d-ci", "ci-cluster"]
        .iter()
        .map(|c| format!("- name: {c}\n  context: {{cluster: c, user: u}}\n"))
        .collect();
    std::fs::write(
        &kubeconfig,
        format!("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"https://127.0.0.1:1\"}}\ncontexts:\n{contexts}current-context: prod-eu-1\nusers:\n- name: u\n  user: {{token: x}}\n"),
    )
    .unwrap();
    kubeconfig
}

/// Each provider refuses, before it connects, the faults it cannot do, with the list of what it
/// can; the provider comes from `--provider` or the context's name.
#[test]
fn each_provider_refuses_what_it_cannot_do_and_lists_what_it_can() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = unreachable_kubeconfig(dir.path());
    let run =
        |extra: &[&str]| kube_scenario(&fixture("kube-machine.yaml"), &kubeconfig, extra).assert();
    // kind (from the context name): everything but a partition that singles out a component.
    let kind = run(&["--context", "kind-chaos"])
        .code(2)
        .get_output()
        .clone();
    let err = String::from_utf8_lossy(&kind.stderr);
    assert!(err.contains("kube-machine.yaml:12:5: `partition: [kube-controller-manager/leader, api-server]`: on kind, kube-controller-manager shares its node container's network"), "{err}");
    assert!(err.contains("the kind provider can do:"), "{err}");
    assert!(
        err.contains("- api-server and etcd: stop, crash, start, restart"),
        "{err}"
    );
    assert_eq!(
        err.matches("kube-machine.yaml:").count(),
        1,
        "only the partition: {err}"
    );
    // k3s (from a k3d context): the scheduler, etcd and a component partition are refused.
    let k3s = run(&["--context", "k3d-ci"]).code(2).get_output().clone();
    let err = String::from_utf8_lossy(&k3s.stderr);
    for (at, text) in [
        (
            "10:5",
            "`kill: kube-scheduler/leader`: k3s runs kube-scheduler inside its server process: it cannot be stopped alone",
        ),
        (
            "11:5",
            "`etcd: crash`: k3s keeps its datastore inside the server process: use `api-server`",
        ),
        (
            "12:5",
            "`partition: [kube-controller-manager/leader, api-server]`: k3s runs kube-controller-manager inside its server process",
        ),
    ] {
        assert!(
            err.contains(&format!("kube-machine.yaml:{at}: {text}")),
            "{at}: {err}"
        );
    }
    assert!(err.contains("the k3s provider can do:"), "{err}");
    assert!(
        !err.contains("kube-machine.yaml:9:5"),
        "api-server is the k3s server: {err}"
    );
    // generic (named): only the API.
    let generic = run(&[
        "--context",
        "ci-cluster",
        "--allow-context",
        "ci-cluster",
        "--provider",
        "generic",
    ])
    .code(2)
    .get_output()
    .clone();
    let err = String::from_utf8_lossy(&generic.stderr);
    assert!(err.contains("kube-machine.yaml:9:5: `api-server: stop`: it needs the machine the cluster runs on, and the generic provider has only the API"), "{err}");
    assert_eq!(err.matches("kube-machine.yaml:").count(), 6, "{err}");
    assert!(
        err.contains("the generic provider can do:\n      - delete-pods, recover, bind"),
        "{err}"
    );
    // Nothing in the name: the nodes will tell, so the cluster must be reached first (exit 3).
    run(&["--context", "ci-cluster", "--allow-context", "ci-cluster"])
        .code(3)
        .stderr(predicate::str::contains(
            "cannot reach the cluster's API server",
        ));
    // --dry-run says how each fault is carried out by the provider.
    kube_scenario(
        &fixture("kube-kind.yaml"),
        &kubeconfig,
        &["--context", "k3d-ci", "--provider", "kind", "--dry-run"],
    )
    .assert()
        .code(0)
        .stdout(predicate::str::contains("via kind: in each control-plane node container: mv /etc/kubernetes/manifests/kube-apiserver.yaml /etc/kubernetes/kubechaos-held/"))
        .stdout(predicate::str::contains("via kind: docker pause node-1\n           undone by: docker unpause node-1"))
        .stdout(predicate::str::contains("via kind: iptables -I OUTPUT"));
}

/// `--provider k3s-container` starts k3s through testcontainers: without a Docker engine that is
/// an environment failure (exit 3) that says what is missing, and nothing is left behind.
#[cfg(feature = "testcontainers")]
#[test]
fn k3s_in_a_container_without_a_docker_engine_is_exit_3_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let before = leftover_k3s_dirs();
    kubechaos()
        // No engine answers here, whatever this machine has.
        .env(
            "DOCKER_HOST",
            format!("unix://{}/docker.sock", tmp.path().display()),
        )
        .env("TMPDIR", tmp.path())
        .args([
            "scenario",
            "scenarios-kube/api-server-restart.yaml",
            "--backend",
            "kube",
            "--provider",
            "k3s-container",
        ])
        .assert()
        .code(3)
        .stderr(predicate::str::contains(
            "cannot start k3s in a container through testcontainers",
        ))
        .stderr(predicate::str::contains(
            "needs a Docker engine where kubechaos runs",
        ));
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "its configuration directory is removed"
    );
    assert_eq!(leftover_k3s_dirs(), before);
}

#[cfg(feature = "testcontainers")]
fn leftover_k3s_dirs() -> usize {
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter(|e| {
            e.as_ref().is_ok_and(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("kubechaos-k3s-")
            })
        })
        .count()
}

/// A build without the `testcontainers` feature says how to get one (exit 2).
#[cfg(not(feature = "testcontainers"))]
#[test]
fn k3s_in_a_container_needs_the_testcontainers_feature() {
    kubechaos()
        .args([
            "scenario",
            "scenarios-kube/api-server-restart.yaml",
            "--backend",
            "kube",
            "--provider",
            "k3s-container",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "cargo run --features testcontainers",
        ));
}

/// The CI kubechaos ships: the GitLab template's jobs and the action run the suite and keep every
/// report; kubechaos's own nightly pipelines use them on every backend, and what each existing-
/// cluster job plays is valid for its provider. (The linters of each system run in ci/test:
/// ci/lint-pipelines.)
#[test]
fn the_nightly_pipelines_run_the_suite_on_every_backend_and_keep_the_reports() {
    let read = |f: &str| std::fs::read_to_string(repo().join(f)).unwrap();
    let yaml = |f: &str| -> serde_json::Value { serde_saphyr::from_str(&read(f)).unwrap() };
    let template = yaml("ci/gitlab/kubechaos.gitlab-ci.yml");
    let suite = &template[".kubechaos"];
    let script = suite["script"].to_string();
    for part in [
        "kubechaos suite $KUBECHAOS_SCENARIOS --backend \\\"$KUBECHAOS_BACKEND\\\" $KUBECHAOS_ARGS",
        "--junit \\\"kubechaos-reports/junit.xml\\\"",
        "--json \\\"kubechaos-reports/summary.json\\\"",
        "--markdown \\\"kubechaos-reports/summary.md\\\"",
        // Each scenario's HTML report is kept with the other reports.
        "--report-dir \\\"kubechaos-reports/html\\\"",
    ] {
        assert!(script.contains(part), "{part}: {script}");
    }
    assert_eq!(suite["artifacts"]["paths"][0], "kubechaos-reports/");
    assert_eq!(
        suite["artifacts"]["reports"]["junit"],
        "kubechaos-reports/junit.xml"
    );
    assert_eq!(suite["artifacts"]["when"], "always");
    // The local job installs, builds the control plane and plays, in that order.
    let local = template[".kubechaos-local"]["script"].to_string();
    let at = |s: &str| local.find(s).unwrap_or_else(|| panic!("{s}: {local}"));
    assert!(at("cargo install") < at("kubechaos cluster build"));
    assert!(at("kubechaos cluster build") < at("kubechaos suite"));
    // The defects a user met, kept out: dind reached on 2375 needs TLS off; no failure hidden
    // by `|| true`; kind and k3d pinned releases, not a main branch or `latest`; Go from the Go
    // image (Debian's is too old for the pins), and the privileged runner said.
    let kube = &template[".kubechaos-kind"]["variables"];
    assert_eq!(kube["DOCKER_HOST"], "tcp://docker:2375");
    assert_eq!(kube["DOCKER_TLS_CERTDIR"], "");
    assert!(kube["KIND_VERSION"].as_str().unwrap().starts_with("v0."));
    assert!(template[".kubechaos-k3d"]["variables"]["K3D_VERSION"]
        .as_str()
        .unwrap()
        .starts_with("v5."));
    for file in [
        "ci/gitlab/kubechaos.gitlab-ci.yml",
        "ci/gitlab/kubechaos-nightly.gitlab-ci.yml",
    ] {
        let text = read(file);
        for bad in ["|| true", "dl/latest", "/main/install.sh", "golang-go"] {
            assert!(!text.contains(bad), "{file}: {bad}");
        }
    }
    assert!(template[".kubechaos-local"]["image"]
        .as_str()
        .unwrap()
        .starts_with("golang:1.26"));
    assert!(template[".kubechaos-local"]["before_script"][0]
        .as_str()
        .unwrap()
        .contains("needs a privileged runner"));
    // The template installs the version kubechaos is.
    assert_eq!(
        template[".kubechaos"]["variables"]["KUBECHAOS_VERSION"],
        format!("v{}", env!("CARGO_PKG_VERSION"))
    );

    // The Jobs of ci/kubernetes name the image the release publishes for this version.
    let image = format!(
        "image: ghcr.io/{}:v{}",
        env!("CARGO_PKG_REPOSITORY").trim_start_matches("https://github.com/"),
        env!("CARGO_PKG_VERSION")
    );
    for file in [
        "ci/kubernetes/suite-job.yaml",
        "ci/kubernetes/explore-indexed-job.yaml",
    ] {
        assert!(read(file).contains(&image), "{file}: {image}");
    }
    assert!(read("ci/github/release.yml").contains("name=ghcr.io/${{ github.repository }}"));

    // kubechaos's own GitLab nightly: each backend's job extends the template's, installing from
    // this checkout.
    let gitlab = yaml("ci/gitlab/kubechaos-nightly.gitlab-ci.yml");
    assert_eq!(
        gitlab["include"][0]["local"],
        "ci/gitlab/kubechaos.gitlab-ci.yml"
    );
    assert_eq!(
        gitlab[".nightly"]["variables"]["KUBECHAOS_SOURCE"],
        "$CI_PROJECT_DIR"
    );
    for (job, base) in [
        ("kubechaos:sim", ".kubechaos"),
        ("kubechaos:local", ".kubechaos-local"),
        ("kubechaos:kind", ".kubechaos-kind"),
        ("kubechaos:k3s", ".kubechaos-k3d"),
    ] {
        assert_eq!(gitlab[job]["extends"][0], base, "{job}");
        assert!(template[base].is_object(), "{base} is in the template");
    }
    assert_eq!(
        gitlab["kubechaos:kind"]["variables"]["KUBECHAOS_SCENARIOS"],
        "scenarios-kube/ scenarios-kind/",
        "the kind job plays both"
    );

    // The action: installs, runs the suite with every report, shows the verdicts in the job
    // summary, uploads them even when the suite failed, then fails with its exit code.
    let action = yaml("action.yml");
    let steps = action["runs"]["steps"].as_array().unwrap();
    let run_of = |name: &str| {
        steps
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no step {name}"))
    };
    let suite = run_of("Run the suite")["run"].as_str().unwrap();
    for part in [
        "kubechaos suite $SCENARIOS",
        "--junit \"$REPORTS/junit.xml\"",
        "--markdown \"$REPORTS/summary.md\"",
        "--report-dir \"$REPORTS/html\"",
        "GITHUB_STEP_SUMMARY",
    ] {
        assert!(suite.contains(part), "{part}: {suite}");
    }
    assert!(run_of("Upload the reports")["if"]
        .as_str()
        .unwrap()
        .contains("always()"));
    assert!(run_of("The verdict")["run"]
        .as_str()
        .unwrap()
        .contains("exit \"$CODE\""));
    assert!(
        run_of("Install kubechaos")["run"]
            .as_str()
            .unwrap()
            .contains("cargo install --locked --path \"$GITHUB_ACTION_PATH/harness\""),
        "the action installs the kubechaos it is part of"
    );
    for file in [
        "action.yml",
        "ci/github/nightly.yml",
        "ci/github/explore.yml",
    ] {
        let text = read(file);
        for old in [
            "actions/checkout@v4",
            "actions/cache@v4",
            "actions/setup-go@v5",
            "actions/upload-artifact@v4",
            "actions/download-artifact@v4",
            "/main/install.sh",
        ] {
            assert!(!text.contains(old), "{file}: {old}");
        }
    }

    // kubechaos's own GitHub nightly: every backend, through the action.
    let github = yaml("ci/github/nightly.yml");
    let job = &github["jobs"]["suite"];
    let matrix = job["strategy"]["matrix"]["include"].as_array().unwrap();
    let backends: Vec<&str> = matrix
        .iter()
        .map(|m| m["backend"].as_str().unwrap())
        .collect();
    assert_eq!(backends, ["sim", "local", "kind", "k3s"]);
    assert!(job["steps"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["uses"] == "./"));
    assert_eq!(matrix[2]["scenarios"], "scenarios-kube/ scenarios-kind/");
    // What each existing-cluster job plays is valid for its provider.
    for (dirs, provider) in [
        (&["scenarios-kube/"][..], "k3s"),
        (&["scenarios-kube/", "scenarios-kind/"][..], "kind"),
    ] {
        kubechaos()
            .arg("validate")
            .args(dirs)
            .args(["--backend", "kube", "--provider", provider])
            .assert()
            .code(0);
    }
    kubechaos()
        .args([
            "validate",
            "scenarios-kind/",
            "--backend",
            "kube",
            "--provider",
            "k3s",
        ])
        .assert()
        .code(2);
}

/// A suite checks every file first: one bad file, and nothing runs.
#[test]
fn a_suite_with_a_bad_file_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        repo().join("scenarios/api-restart.yaml"),
        dir.path().join("api-restart.yaml"),
    )
    .unwrap();
    std::fs::copy(
        repo().join("harness/tests/fixtures/sim-unsupported.yaml"),
        dir.path().join("sim-unsupported.yaml"),
    )
    .unwrap();
    kubechaos()
        .arg("suite")
        .arg(dir.path())
        .assert()
        .code(2)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains(
            "sim-unsupported.yaml:10:11: target `node/node-7`",
        ))
        .stderr(predicate::str::contains("nothing was run"));
    kubechaos()
        .args(["suite", "no/such/dir"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no/such/dir does not exist"));
}

#[test]
fn the_checked_in_schema_is_current() {
    let out = kubechaos()
        .arg("schema")
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let checked_in = std::fs::read_to_string(repo().join("docs/scenario.schema.json")).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        checked_in,
        "docs/scenario.schema.json is stale: run `cargo run -- schema > docs/scenario.schema.json`"
    );
}

#[test]
fn shipped_scenarios_validate_list_and_carry_the_schema_modeline() {
    kubechaos()
        .args(["validate", "scenarios/"])
        .assert()
        .code(0)
        .stdout(predicate::str::contains("ok  scenarios/api-restart.yaml"));
    let listed = kubechaos()
        .arg("list")
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let listed = String::from_utf8(listed).unwrap();
    for entry in std::fs::read_dir(repo().join("scenarios")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with("# yaml-language-server: $schema=../docs/scenario.schema.json\n"),
            "{} lacks the modeline",
            path.display()
        );
        let stem = path.file_stem().unwrap().to_str().unwrap().to_owned();
        assert!(listed.contains(&stem), "`list` does not show {stem}");
    }
}

#[test]
fn help_shows_examples_and_exit_codes() {
    kubechaos()
        .arg("--help")
        .assert()
        .code(0)
        .stdout(predicate::str::contains("kubechaos scenario api-restart"))
        .stdout(predicate::str::contains(
            "Exit codes: 0 every invariant held",
        ));
}

#[test]
fn the_format_reference_describes_every_key_of_the_schema() {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("docs/scenario.schema.json")).unwrap(),
    )
    .unwrap();
    let doc = std::fs::read_to_string(repo().join("docs/scenario-format.md")).unwrap();
    let mut keys = std::collections::BTreeSet::new();
    fn walk(v: &serde_json::Value, keys: &mut std::collections::BTreeSet<String>) {
        match v {
            serde_json::Value::Object(map) => {
                if let Some(serde_json::Value::Object(props)) = map.get("properties") {
                    keys.extend(props.keys().cloned());
                }
                map.values().for_each(|v| walk(v, keys));
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, keys)),
            _ => {}
        }
    }
    walk(&schema, &mut keys);
    assert!(keys.len() > 30, "the schema names {} keys", keys.len());
    for key in keys {
        assert!(
            doc.contains(&format!("`{key}")),
            "docs/scenario-format.md does not describe `{key}`"
        );
    }
}

/// A `command` agent's program is checked before the run: one that is not there is exit 2 at the
/// agent's position (not a run that dies at its start); a file the sim cannot run (its own program) is
/// valid, and `validate` says which backends can.
#[test]
fn a_command_agent_whose_program_is_missing_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, program: &str| {
        let path = dir.path().join(format!("{name}.yaml"));
        std::fs::write(
            &path,
            format!(
                "name: {name}\ncluster:\n  nodes: 1\n  agents:\n    - name: mine\n      lease: default/mine\n      command: [{program}, --flag]\nfaults: []\nexpect:\n  - single-leader: {{lease: default/mine}}\nduration: 30s\n"
            ),
        )
        .unwrap();
        path
    };
    let missing = write("missing", "./no-such-controller");
    for args in [
        vec!["validate", missing.to_str().unwrap(), "--backend", "local"],
        vec!["scenario", missing.to_str().unwrap(), "--backend", "local"],
    ] {
        kubechaos()
            .args(&args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(
                "missing.yaml:5:7: agent `mine`: `./no-such-controller` is not an executable file",
            ));
    }
    let on_path = write("on-path", "sh");
    kubechaos()
        .args(["validate", on_path.to_str().unwrap()])
        .assert()
        .code(0)
        .stdout(predicate::str::contains("; runs on local, kube)"));
}

/// A run kept with `--keep` that has ended: `cluster down DIR` removes its directory, as the
/// README says (it once said "no local control plane is running" and left it); without DIR a
/// kept directory stays, being kept on purpose.
#[test]
fn cluster_down_dir_removes_a_kept_run_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("kubechaos-kept");
    std::fs::create_dir(&dir).unwrap();
    // A pid that is no kubechaos: the run has ended.
    std::fs::write(
        dir.join("cluster.json"),
        format!(
            r#"{{"pid": 1, "purpose": "scenario api-restart", "kubeconfig": "{}", "keep": true}}"#,
            dir.join("admin.kubeconfig").display()
        ),
    )
    .unwrap();
    kubechaos()
        .args(["cluster", "down"])
        .env("TMPDIR", tmp.path())
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "no local control plane is running",
        ));
    assert!(dir.exists(), "kept on purpose when no DIR is named");
    kubechaos()
        .args(["cluster", "down"])
        .arg(&dir)
        .env("TMPDIR", tmp.path())
        .assert()
        .success()
        .stdout(predicate::str::contains(format!(
            "removed {} (kept by --keep)",
            dir.display()
        )));
    assert!(!dir.exists());
}

/// On an existing cluster the components' own words are not read, so `single-leader` on their
/// Lease is refused before the run (exit 2 at the invariant) instead of passing on nothing (it
/// once said "0 leadership terms observed") or failing with no evidence at the end.
#[test]
fn single_leader_on_a_components_lease_is_refused_on_kube() {
    kubechaos()
        .args(["validate", "scenarios/api-restart.yaml", "--backend", "kube"])
        .current_dir(repo())
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "`single-leader` on kube-system/kube-scheduler: on an existing cluster kubechaos reads the Lease but not kube-scheduler's own log lines",
        ));
}

/// A pod agent in a file without `cluster.manifests` runs on kube (the cluster's pods) but not on
/// local, where its pods can only come from the manifests: `validate` says so, and the run is
/// refused before anything starts (exit 2 at the agent's line) instead of ending with exit 3 after
/// the start's wait.
#[test]
fn a_pod_agent_without_manifests_does_not_run_on_local() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no-manifests.yaml");
    std::fs::write(
        &path,
        "name: no-manifests\ncluster:\n  agents:\n    - {name: op, lease: ops/op-lock, pods: {namespace: ops, selector: app=op}}\nfaults:\n  - {at: 5s, kill: agent/op/leader}\nexpect:\n  - leader-reacquired: {lease: ops/op-lock, within: 30s}\n",
    )
    .unwrap();
    kubechaos()
        .args(["validate", path.to_str().unwrap()])
        .assert()
        .code(0)
        .stdout(predicate::str::contains("; runs on kube)"));
    for args in [
        vec!["validate", path.to_str().unwrap(), "--backend", "local"],
        vec!["scenario", path.to_str().unwrap(), "--backend", "local"],
    ] {
        kubechaos()
            .args(&args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(
                "no-manifests.yaml:4:7: pod agent `op`: on the local backend its pods come from `cluster.manifests`, and the file has none",
            ));
    }
}

/// On an existing cluster, agents run on this machine: their kills and their partitions from
/// the API server are for every provider, the generic one included; a partition between an agent
/// and anything but the API server is refused before the run, with the reason.
#[test]
fn agents_are_valid_on_an_existing_cluster_with_every_provider() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, fault: &str| {
        let path = dir.path().join(format!("{name}.yaml"));
        std::fs::write(
            &path,
            format!(
                "name: {name}\ncluster:\n  nodes: 1\n  agents: [{{name: a, replicas: 2, lease: default/a}}]\nfaults:\n  - {fault}\nexpect:\n  - single-leader: {{lease: default/a}}\nduration: 1m\n"
            ),
        )
        .unwrap();
        path
    };
    for (name, fault) in [
        (
            "cut",
            "{at: 5s, partition: [agent/a/leader, api-server], for: 10s}",
        ),
        ("kill", "{at: 5s, kill: agent/a/0}"),
    ] {
        let path = write(name, fault);
        for provider in ["generic", "kind", "k3s"] {
            kubechaos()
                .args([
                    "validate",
                    path.to_str().unwrap(),
                    "--backend",
                    "kube",
                    "--provider",
                    provider,
                ])
                .assert()
                .code(0);
        }
    }
    let wrong = write(
        "wrong",
        "{at: 5s, partition: [agent/a/leader, node/node-0], for: 10s}",
    );
    kubechaos()
        .args(["validate", wrong.to_str().unwrap(), "--backend", "kube", "--provider", "kind"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "wrong.yaml:6:5: `partition: [agent/a/leader, node/node-0]`: an agent reaches only the API server",
        ));
}

/// Pod agents and manifests: the shipped examples are valid and say where they run; the sim
/// refuses them before anything runs (exit 2, at the agent's and the manifest's lines), and the
/// kube backend's generic provider a partition of a pod (it cannot reach the node); a manifest whose pod runs a program
/// that is not there, and a manifest that is missing, are exit 2 before the run, where they are
/// named.
#[test]
fn pod_agents_and_manifests_run_on_local_and_are_refused_elsewhere() {
    kubechaos()
        .args([
            "validate",
            "examples/reference-agent-api-outage.yaml",
            "examples/reference-agent-leader-cut-off.yaml",
        ])
        .assert()
        .code(0)
        .stdout(predicate::str::contains(
            "ok  examples/reference-agent-api-outage.yaml (reference-agent-api-outage: 1 fault step, 2 invariants; runs on local, kube)",
        ));
    let example = "examples/reference-agent-leader-cut-off.yaml";
    kubechaos()
        .args(["scenario", example])
        .assert()
        .code(2)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains(
            "reference-agent-leader-cut-off.yaml:17:7: agent `reference-agent` is a pod agent (`pods`); the sim runs no software of yours",
        ))
        .stderr(predicate::str::contains(
            "reference-agent-leader-cut-off.yaml:15:15: `cluster.manifests` (manifests/reference-agent.yaml): the sim runs no manifests",
        ));
    // A pod is cut off by packet filter rules in its node: kind and k3d reach the nodes, the
    // generic provider does not.
    kubechaos()
        .args([
            "validate",
            example,
            "--backend",
            "kube",
            "--provider",
            "kind",
        ])
        .assert()
        .code(0);
    kubechaos()
        .args(["validate", example, "--backend", "kube", "--provider", "generic"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "reference-agent-leader-cut-off.yaml:21:5: `partition: [agent/reference-agent/leader, api-server]`: cutting one pod off needs packet filter rules in its node, and the generic provider has only the API",
        ));

    let dir = tempfile::tempdir().unwrap();
    let manifest = std::fs::read_to_string(repo().join("examples/manifests/reference-agent.yaml"))
        .unwrap()
        .replace(
            "command: [kubechaos, agent,",
            "command: [./no-such-operator, agent,",
        );
    std::fs::write(dir.path().join("op.yaml"), manifest).unwrap();
    let scenario = |name: &str, manifests: &str| {
        let path = dir.path().join(format!("{name}.yaml"));
        std::fs::write(
            &path,
            format!("name: {name}\ncluster:\n  nodes: 1\n  manifests: {manifests}\n  agents:\n    - {{name: op, lease: reference-agent/reference-agent-lock, pods: {{namespace: reference-agent, selector: app=reference-agent}}}}\nexpect:\n  - single-leader: {{lease: reference-agent/reference-agent-lock}}\nduration: 30s\n"),
        )
        .unwrap();
        path
    };
    let missing_program = scenario("missing-program", "[op.yaml]");
    kubechaos()
        .args(["validate", missing_program.to_str().unwrap(), "--backend", "local"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "missing-program.yaml:4:15: Deployment reference-agent in op.yaml: container `agent` runs `./no-such-operator`, which is not an executable file",
        ));
    // An environment the nodes do not give is said before the run too, not as a pod that never
    // starts.
    let secret = std::fs::read_to_string(repo().join("examples/manifests/reference-agent.yaml"))
        .unwrap()
        .replace(
            "--mode, correct]",
            "--mode, correct]\n          env: [{name: TOKEN, valueFrom: {secretKeyRef: {name: s, key: k}}}]",
        );
    std::fs::write(dir.path().join("secret.yaml"), secret).unwrap();
    let with_secret = scenario("with-secret", "[secret.yaml]");
    kubechaos()
        .args(["validate", with_secret.to_str().unwrap(), "--backend", "local"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "with-secret.yaml:4:15: Deployment reference-agent in secret.yaml: container `agent`: env `TOKEN`: only `valueFrom.fieldRef` is supported",
        ));
    let missing_file = scenario("missing-file", "[op.yaml, nowhere.yaml]");
    kubechaos()
        .args([
            "scenario",
            missing_file.to_str().unwrap(),
            "--backend",
            "local",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "missing-file.yaml:4:24: `cluster.manifests`: cannot read `nowhere.yaml`",
        ));
}

/// Runs the installed copy with these arguments: exit code, stdout, stderr.
type Installed = dyn Fn(&[&str]) -> (Option<i32>, String, String);

/// A copy of the binary, as `cargo install` leaves one, in a directory of its own and run from
/// another (no `./scenarios` there), with a cache of its own: `kubechaos list` shows the
/// shipped scenarios, `validate` and `scenario` find them by name and play `api-restart` on the
/// sim, and a name that is none of them says which names there are. Returns how to run it.
fn installed_binary_works(root: &Path, hide: Option<&Path>) -> Box<Installed> {
    let bin = root.join("bin");
    let work = root.join("work");
    let cache = root.join("cache");
    for d in [&bin, &work, &cache] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::copy(env!("CARGO_BIN_EXE_kubechaos"), bin.join("kubechaos")).unwrap();
    let hide = hide.map(Path::to_path_buf);
    let run = move |args: &[&str]| {
        let mut c = match &hide {
            // In a mount namespace of its own where the checkout is an empty directory.
            Some(dir) => {
                let mut c = Command::new("unshare");
                c.args([
                    "--mount",
                    "sh",
                    "-c",
                    "mount -t tmpfs none \"$0\" && shift && exec \"$@\"",
                ])
                .arg(dir)
                .arg("--")
                .arg(bin.join("kubechaos"));
                c
            }
            None => Command::new(bin.join("kubechaos")),
        };
        let out = c
            .args(args)
            .current_dir(&work)
            .env("KUBECHAOS_CACHE", &cache)
            .env("RUST_LOG", "off")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stdout, stderr) = run(&["list"]);
    assert_eq!(code, Some(0), "{stderr}");
    for name in [
        "api-restart",
        "delete-all-schedulers",
        "agent-leader-partition",
    ] {
        assert!(stdout.contains(name), "{name}:\n{stdout}");
    }
    let (code, stdout, stderr) = run(&["validate", "api-restart"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let (code, stdout, stderr) = run(&["scenario", "api-restart"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("0 violated"), "{stdout}");
    let (code, _, stderr) = run(&["scenario", "no-such-scenario"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("among the shipped ones (agent-api-restart, "),
        "{stderr}"
    );
    Box::new(run)
}

#[test]
fn an_installed_binary_finds_the_shipped_scenarios_from_any_directory() {
    let root = tempfile::tempdir().unwrap();
    let _ = installed_binary_works(root.path(), None);
}

/// A shipped scenario is read from kubechaos's cache: when the cache cannot be written, that is
/// what the error says (exit 3, the environment), with what to do, not "cannot read the file".
#[test]
fn a_cache_that_cannot_be_written_is_said_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_dir = dir.path().join("cache");
    std::fs::write(&not_a_dir, "a file, not a directory\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kubechaos"))
        .current_dir(dir.path())
        .env("KUBECHAOS_CACHE", &not_a_dir)
        .args(["scenario", "api-restart"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("the shipped `api-restart` could not be written into kubechaos's cache"),
        "{stderr}"
    );
    assert!(
        stderr.contains("expected a writable $KUBECHAOS_CACHE"),
        "{stderr}"
    );
}

/// The same, with the checkout it was built from out of its reach: what it ships is in it, and
/// `cluster build` builds the pinned control plane from what it carries.
#[test]
#[ignore = "real tier: a mount namespace (root: unshare --mount); ci/test runs it"]
fn an_installed_binary_needs_no_checkout() {
    let root = tempfile::tempdir().unwrap();
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let run = installed_binary_works(root.path(), Some(&checkout.canonicalize().unwrap()));
    // The pinned control plane, built into a cache of its own from the modules kubechaos carries
    // (Go's own caches make this quick once `ci/test` has built them).
    let (code, stdout, stderr) = run(&["cluster", "build"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let cache = root.path().join("cache");
    let pins = kubechaos_engine::backend::local::build::Pins::embedded().unwrap();
    for b in kubechaos_engine::backend::local::build::BINARIES {
        let built = cache
            .join(format!("k8s-{}-etcd-{}", pins.kubernetes, pins.etcd))
            .join(b);
        assert!(built.is_file(), "{}: {stderr}", built.display());
    }
}

/// The conventions a user of kubectl expects: shell completion for bash, zsh and fish; the JSON
/// summary alone on standard output with `--json -` (the report then goes to standard error);
/// `-v`/`-q` for the log output on every command, and `-q` with `-v` refused.
#[test]
fn completion_json_on_stdout_and_log_verbosity() {
    for (shell, marker) in [
        ("bash", "complete -F _kubechaos"),
        ("zsh", "#compdef kubechaos"),
        ("fish", "complete -c kubechaos"),
    ] {
        let out = kubechaos().args(["completion", shell]).output().unwrap();
        assert!(out.status.success(), "{shell}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(marker),
            "{shell}: {}",
            &text[..text.len().min(300)]
        );
        assert!(
            text.contains("validate") && text.contains("--backend"),
            "{shell}"
        );
    }
    kubechaos().args(["completion", "tcsh"]).assert().code(2);

    let out = kubechaos()
        .args(["scenario", "api-restart", "--json", "-"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is the JSON summary alone ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(summary["exit_code"], 0);
    assert_eq!(summary["scenarios"][0]["name"], "api-restart");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("verdicts:") && stderr.contains("6 held, 0 violated"),
        "{stderr}"
    );
    kubechaos()
        .args(["scenario", "api-restart", "--junit", "-"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "standard output is for the JSON summary only",
        ));

    let quiet = kubechaos()
        .env_remove("RUST_LOG")
        .args(["-q", "scenario", "api-restart"])
        .output()
        .unwrap();
    assert_eq!(quiet.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&quiet.stderr).contains("INFO"));
    let verbose = kubechaos()
        .env_remove("RUST_LOG")
        .args(["scenario", "api-restart", "-v"])
        .output()
        .unwrap();
    assert_eq!(verbose.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&verbose.stderr).contains("successfully acquired lease"),
        "-v logs at info"
    );
    assert!(
        verbose.stdout.len() > quiet.stdout.len(),
        "-v shows every observed event"
    );
    // `list` and `validate` print one JSON array with `-o json`.
    let list = kubechaos().args(["list", "-o", "json"]).output().unwrap();
    let list: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert!(list
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["name"] == "api-restart" && r["file"] == "scenarios/api-restart.yaml"));
    let checked = kubechaos()
        .args([
            "validate",
            "api-restart",
            "examples/reference-agent-leader-cut-off.yaml",
            "--backend",
            "sim",
            "-o",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(checked.status.code(), Some(2));
    let checked: serde_json::Value = serde_json::from_slice(&checked.stdout).unwrap();
    assert_eq!(checked[0]["valid"], true);
    assert_eq!(checked[0]["runs_on"], serde_json::json!(["sim"]));
    assert_eq!(checked[1]["valid"], false);
    assert!(checked[1]["problems"][0].as_str().unwrap().contains(
        "reference-agent-leader-cut-off.yaml:17:7: agent `reference-agent` is a pod agent"
    ));
    kubechaos()
        .args(["validate", "api-restart", "-q", "-v"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot be used with"));
}

/// `kubechaos init` in an empty repository: `kubechaos suite chaos/` then passes on the sim, the
/// scenario for the user's cluster is valid for kind, a second init changes nothing, and a file
/// changed by hand is not overwritten without `--force` (exit 2, nothing written).
#[test]
fn init_sets_up_a_chaos_directory_that_the_sim_passes() {
    let repo_dir = tempfile::tempdir().unwrap();
    let at = |args: &[&str]| {
        kubechaos()
            .current_dir(repo_dir.path())
            .args(args)
            .output()
            .unwrap()
    };
    let init = [
        "init",
        "--lease",
        "my-operator/my-operator-lock",
        "-l",
        "app.kubernetes.io/name=my-operator",
    ];
    let first = at(&init);
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let chaos = repo_dir.path().join("chaos");
    let read = || {
        [
            "scenario.schema.json",
            "my-operator-api-outage.yaml",
            "cluster/my-operator.yaml",
        ]
        .map(|f| std::fs::read_to_string(chaos.join(f)).unwrap())
    };
    let written = read();
    // Named after the app, not its Lease; and the sim file says it is not the user's software.
    let said = String::from_utf8_lossy(&first.stdout);
    assert!(
        said.contains("plays kubechaos's reference agent on the sim, not my-operator")
            && said.contains("cluster/my-operator.yaml judges my-operator itself"),
        "{said}"
    );
    assert!(written[1].contains("Not your software: kubechaos's reference agent"));
    assert!(written[1].starts_with("# yaml-language-server: $schema=./scenario.schema.json"));
    assert!(written[2].contains("selector: 'app.kubernetes.io/name=my-operator'"));
    let suite = at(&["suite", "chaos/"]);
    assert_eq!(
        suite.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&suite.stdout)
    );
    let kind = at(&[
        "validate",
        "chaos/cluster/",
        "--backend",
        "kube",
        "--provider",
        "kind",
    ]);
    assert_eq!(
        kind.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&kind.stderr)
    );

    let second = at(&init);
    assert_eq!(second.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&second.stdout)
            .matches("unchanged")
            .count(),
        3
    );
    assert_eq!(read(), written);

    let mine = chaos.join("my-operator-api-outage.yaml");
    std::fs::write(&mine, "name: mine\n").unwrap();
    let refused = at(&init);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("expected --force"));
    assert_eq!(std::fs::read_to_string(&mine).unwrap(), "name: mine\n");
    let mut forced = init.to_vec();
    forced.push("--force");
    assert_eq!(at(&forced).status.code(), Some(0));
    assert_eq!(read(), written);
}

/// `kubechaos init --ci github|gitlab` writes the nightly pipeline that plays the chaos
/// directory: GitHub, a workflow using kubechaos's action at this version; GitLab, jobs that
/// extend the template kubechaos ships, included from a .gitlab-ci.yml init writes only where
/// there is none. Twice changes nothing. (ci/lint-pipelines runs actionlint and GitLab's schema on
/// what it writes.)
#[test]
fn init_writes_the_nightly_pipeline_for_github_and_gitlab() {
    let repo_dir = tempfile::tempdir().unwrap();
    let at = |args: &[&str]| {
        let out = kubechaos()
            .current_dir(repo_dir.path())
            .args(args)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let init_ci = |ci: &str| {
        at(&[
            "init",
            "--lease",
            "ops/op-lock",
            "--dir",
            "test/chaos",
            "--ci",
            ci,
        ])
    };
    let yaml = |f: &str| -> serde_json::Value {
        serde_saphyr::from_str(&std::fs::read_to_string(repo_dir.path().join(f)).unwrap()).unwrap()
    };
    let published = format!(
        "{}@v{}",
        env!("CARGO_PKG_REPOSITORY").trim_start_matches("https://github.com/"),
        env!("CARGO_PKG_VERSION")
    );

    init_ci("github");
    let workflow = yaml(".github/workflows/kubechaos.yml");
    let uses: Vec<&serde_json::Value> = ["sim", "cluster"]
        .iter()
        .map(|job| {
            workflow["jobs"][job]["steps"]
                .as_array()
                .unwrap()
                .iter()
                .rfind(|s| s["uses"] == published.as_str())
                .unwrap_or_else(|| panic!("{job} uses {published}"))
        })
        .collect();
    assert_eq!(uses[0]["with"]["scenarios"], "test/chaos/");
    assert_eq!(uses[0]["with"]["backend"], "sim");
    assert_eq!(uses[1]["with"]["scenarios"], "test/chaos/cluster/");
    assert_eq!(uses[1]["with"]["backend"], "kube");
    assert_eq!(uses[1]["with"]["context"], "kind-chaos");
    // Every input given is one the action declares.
    let action: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(repo().join("action.yml")).unwrap())
            .unwrap();
    for u in &uses {
        for (input, _) in u["with"].as_object().unwrap() {
            assert!(action["inputs"][input].is_object(), "{input}");
        }
    }

    // GitLab: no .gitlab-ci.yml yet, so init writes one that includes its pipeline.
    let out = init_ci("gitlab");
    assert!(out.contains("written     .gitlab-ci.yml"), "{out}");
    assert_eq!(
        yaml(".gitlab-ci.yml")["include"][0]["local"],
        ".gitlab/kubechaos.gitlab-ci.yml"
    );
    let pipeline = yaml(".gitlab/kubechaos.gitlab-ci.yml");
    let remote = pipeline["include"][0]["remote"].as_str().unwrap();
    assert!(
        remote.ends_with(&format!(
            "/v{}/ci/gitlab/kubechaos.gitlab-ci.yml",
            env!("CARGO_PKG_VERSION")
        )),
        "{remote}"
    );
    let template: serde_json::Value = serde_saphyr::from_str(
        &std::fs::read_to_string(repo().join("ci/gitlab/kubechaos.gitlab-ci.yml")).unwrap(),
    )
    .unwrap();
    for (job, scenarios) in [
        ("kubechaos:sim", "test/chaos/"),
        ("kubechaos:kind", "test/chaos/cluster/"),
    ] {
        assert_eq!(pipeline[job]["variables"]["KUBECHAOS_SCENARIOS"], scenarios);
        for base in pipeline[job]["extends"].as_array().unwrap() {
            let base = base.as_str().unwrap();
            assert!(
                template[base].is_object() || pipeline[base].is_object(),
                "{job} extends {base}, which neither file has"
            );
        }
    }

    // Twice: nothing changes.
    for ci in ["github", "gitlab"] {
        let again = init_ci(ci);
        assert!(
            again.contains("unchanged   .g")
                && !again
                    .lines()
                    .any(|l| l.starts_with("written") || l.starts_with("overwritten")),
            "{again}"
        );
    }

    // A .gitlab-ci.yml of the user's own is left as it is; init says what to add.
    let root = repo_dir.path().join(".gitlab-ci.yml");
    std::fs::write(&root, "stages: [build]\n").unwrap();
    let out = init_ci("gitlab");
    assert_eq!(std::fs::read_to_string(&root).unwrap(), "stages: [build]\n");
    assert!(out.contains("add to it"), "{out}");
    assert!(
        out.contains("- local: .gitlab/kubechaos.gitlab-ci.yml"),
        "{out}"
    );
}

/// `cluster up`'s API server and etcd member counts are a scenario's, refused as a scenario's
/// are (exit 2, before anything starts).
#[test]
fn cluster_up_refuses_counts_a_scenario_could_not_have() {
    kubechaos()
        .args(["cluster", "up", "--etcd-members", "2"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "'2' for '--etcd-members <ETCD_MEMBERS>': 2 members tolerate no more failures than 1",
        ));
    kubechaos()
        .args(["cluster", "up", "--api-servers", "6"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("6 is not in 1..=5"));
}

/// `kubechaos recover` asks for a subcommand or `--cleanup`; `--cleanup` goes through the safety
/// guard, needs a context that names a kind or k3d cluster, and with no node container of that
/// cluster in Docker says so before it touches anything.
#[test]
fn recover_cleanup_refuses_what_names_no_kind_cluster_of_this_machine() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = unreachable_kubeconfig(dir.path());
    kubechaos()
        .arg("recover")
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "expected a subcommand (pod-from, bind) or --cleanup",
        ));
    let cleanup = |extra: &[&str]| {
        let mut c = kubechaos();
        c.args(["recover", "--cleanup", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(extra);
        c.assert()
    };
    cleanup(&[]).code(2).stderr(predicate::str::contains(
        "refusing to touch context `prod-eu-1`: it does not look disposable",
    ));
    cleanup(&["--context", "ci-cluster", "--allow-context", "ci-cluster"])
        .code(2)
        .stderr(predicate::str::contains(
            "names no kind or k3d cluster; expected a context kind-NAME or k3d-NAME",
        ));
    // A docker that lists no container of the cluster (a stand-in: no Docker engine needed).
    let docker = dir.path().join("docker");
    std::fs::write(&docker, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&docker, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut c = kubechaos();
    c.args(["recover", "--cleanup", "--kubeconfig"])
        .arg(&kubeconfig)
        .args(["--context", "kind-chaos"])
        .env("KUBECHAOS_DOCKER", &docker);
    c.assert().code(3).stderr(predicate::str::contains(
        "Docker has no node container of the kind cluster chaos",
    ));
}

//! The sim's events for every shipped scenario, seeds 1 to 3, byte for byte as `--events` wrote
//! them when they were recorded in `tests/golden/`. A sim run is a pure function of (scenario,
//! seed, version): a change that is meant to move code and keep behaviour keeps these files.
//!
//! A change that is meant to change what the sim does (a model mended after the real control
//! plane disagreed, a new event field) re-records them on purpose, and the diff of the golden
//! files is part of its review:
//!
//! ```sh
//! KUBECHAOS_BLESS=1 cargo test --test golden_events
//! ```

mod common;

use std::path::{Path, PathBuf};

use common::{kubechaos, repo};

const SEEDS: [u32; 3] = [1, 2, 3];

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn shipped() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repo().join("scenarios"))
        .unwrap()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".yaml"))
                .map(str::to_owned)
        })
        .collect();
    names.sort();
    names
}

/// The events file of one sim run, as the user gets it.
fn events_of(name: &str, seed: u32, dir: &Path) -> Vec<u8> {
    let path = dir.join(format!("{name}.seed{seed}.jsonl"));
    let out = kubechaos()
        .args(["scenario", &format!("scenarios/{name}.yaml")])
        .args(["--seed", &seed.to_string()])
        .arg("--events")
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{name} seed {seed} did not run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(&path).unwrap()
}

#[test]
fn every_shipped_scenario_plays_byte_for_byte_as_recorded() {
    let bless = std::env::var_os("KUBECHAOS_BLESS").is_some();
    let names = shipped();
    assert!(names.len() >= 9, "the shipped scenarios were not found");
    let tmp = tempfile::tempdir().unwrap();
    // Each run is its own process: play them on every core.
    let runs: Vec<(&String, u32, Vec<u8>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = names
            .iter()
            .flat_map(|name| SEEDS.map(|seed| (name, seed)))
            .map(|(name, seed)| {
                let dir = tmp.path();
                scope.spawn(move || (name, seed, events_of(name, seed, dir)))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut differ = Vec::new();
    for (name, seed, got) in runs {
        let golden = golden_dir().join(format!("{name}.seed{seed}.jsonl"));
        if bless {
            std::fs::create_dir_all(golden_dir()).unwrap();
            std::fs::write(&golden, &got).unwrap();
            continue;
        }
        let want = std::fs::read(&golden).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; record it with KUBECHAOS_BLESS=1 cargo test --test golden_events",
                golden.display()
            )
        });
        if got != want {
            let got = String::from_utf8_lossy(&got);
            let want = String::from_utf8_lossy(&want);
            let first = got
                .lines()
                .zip(want.lines())
                .position(|(g, w)| g != w)
                .unwrap_or_else(|| got.lines().count().min(want.lines().count()));
            differ.push(format!(
                "{name} seed {seed}: first difference at line {}:\n  recorded: {}\n  now:      {}",
                first + 1,
                want.lines().nth(first).unwrap_or("(end of file)"),
                got.lines().nth(first).unwrap_or("(end of file)"),
            ));
        }
    }
    // Every recorded file belongs to a shipped scenario and seed: none is left unchecked.
    let expected: Vec<String> = names
        .iter()
        .flat_map(|n| SEEDS.map(|s| format!("{n}.seed{s}.jsonl")))
        .collect();
    let mut recorded: Vec<String> = std::fs::read_dir(golden_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    recorded.sort();
    let mut expected_sorted = expected.clone();
    expected_sorted.sort();
    assert_eq!(
        recorded, expected_sorted,
        "tests/golden/ must hold exactly one file per shipped scenario and seed"
    );
    assert!(
        differ.is_empty(),
        "the sim's events changed (if on purpose, re-record with KUBECHAOS_BLESS=1):\n{}",
        differ.join("\n")
    );
}

//! `list` and `validate`: scenario files, read but not played.

use std::io::Write;
use std::path::PathBuf;

use super::End;
use crate::cli::{backend_of, Backend, Output, Provider};
use crate::failure::{Failure, Verdict};
use kubechaos_core::scenario;
use kubechaos_engine::backend::BackendError;

/// `kubechaos list`: the scenarios in ./scenarios and the shipped ones, each with its summary.
pub fn list(output: Output) -> End {
    let mut rows: Vec<(String, String, String)> = Vec::new();
    for path in scenario::catalog() {
        let Some(stem) = path.file_stem().map(|s| s.to_string_lossy().into_owned()) else {
            continue;
        };
        let file = path.display().to_string();
        rows.push(match scenario::load(&path) {
            Ok(s) => {
                let summary = s
                    .description
                    .split_terminator(['\n'])
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_owned();
                (s.name, summary, file)
            }
            Err(e) => {
                let first = e.to_string().lines().next().unwrap_or("").to_owned();
                (stem, format!("(invalid: {first})"), file)
            }
        });
    }
    if output == Output::Json {
        let rows: Vec<serde_json::Value> = rows
            .into_iter()
            .map(|(name, summary, file)| serde_json::json!({"name": name, "summary": summary, "file": file}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows).expect("JSON"));
        return Ok(Verdict::Held);
    }
    let width = rows
        .iter()
        .map(|(n, ..)| n.chars().count())
        .max()
        .unwrap_or(0);
    if rows.is_empty() {
        eprintln!("kubechaos: no scenarios found in ./scenarios");
    }
    for (name, summary, _) in rows {
        println!("{name:<width$}  {summary}");
    }
    std::io::stdout().flush().ok();
    Ok(Verdict::Held)
}

/// `kubechaos validate`: every problem of every file. With `--backend`, what that backend cannot
/// do is a problem too; without, a file is valid when some backend can run it, and each line says
/// which backends can.
pub fn validate(
    paths: &[PathBuf],
    backend: Option<Backend>,
    provider: Provider,
    output: Output,
) -> End {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let found = scenario::yaml_files(p);
            if found.is_empty() {
                return Err(Failure::Input(format!(
                    "{}: no .yaml files in this directory",
                    p.display()
                )));
            }
            files.extend(found);
        } else if p.exists() {
            files.push(p.clone());
        } else {
            // A name, as `scenario NAME` takes it: ./scenarios/NAME.yaml or a shipped one.
            files.push(scenario::resolve(&p.to_string_lossy())?);
        }
    }
    let backends = match backend {
        Some(b) => vec![b],
        None => vec![Backend::Sim, Backend::Local, Backend::Kube],
    };
    let worlds: Vec<(Backend, Box<dyn kubechaos_engine::run::Playable>)> = backends
        .iter()
        .map(|b| {
            let world = backend_of(
                *b,
                None,
                None,
                false,
                kubechaos_engine::backend::kube::KubeTarget {
                    provider: provider.into(),
                    ..Default::default()
                },
            );
            (*b, world)
        })
        .collect();
    let mut bad = 0;
    // For `-o json`: each file, whether it is valid, where it runs, and its problems.
    let mut found: Vec<serde_json::Value> = Vec::new();
    let entry = |f: &PathBuf, name: Option<&str>, runs_on: &[&str], problems: Vec<String>| {
        serde_json::json!({
            "file": f.display().to_string(),
            "name": name,
            "valid": problems.is_empty(),
            "runs_on": runs_on,
            "problems": problems,
        })
    };
    for f in &files {
        let s = match scenario::load(f) {
            Ok(s) => s,
            Err(e) => {
                found.push(entry(
                    f,
                    None,
                    &[],
                    e.to_string().lines().map(str::to_owned).collect(),
                ));
                Failure::Load(e).report();
                bad += 1;
                continue;
            }
        };
        let checked: Vec<(Backend, Vec<(scenario::Pos, String)>)> =
            worlds.iter().map(|(b, w)| (*b, w.check(&s))).collect();
        let runs_on: Vec<&str> = checked
            .iter()
            .filter(|(_, p)| p.is_empty())
            .map(|(b, _)| b.name())
            .collect();
        if runs_on.is_empty() {
            let shown = s.source.path.display().to_string();
            let problems = checked
                .iter()
                .flat_map(|(b, problems)| {
                    let shown = &shown;
                    problems
                        .iter()
                        .map(move |(pos, p)| format!("{shown}:{pos}: {p} ({} backend)", b.name()))
                })
                .collect();
            found.push(entry(f, Some(&s.name), &[], problems));
            for (b, problems) in checked {
                Failure::of_run(
                    &s.source.path,
                    BackendError::Unsupported {
                        backend: b.name(),
                        problems,
                    },
                )
                .report();
            }
            bad += 1;
            continue;
        }
        found.push(entry(f, Some(&s.name), &runs_on, Vec::new()));
        if output == Output::Json {
            continue;
        }
        println!(
            "ok  {} ({}: {} fault step{}, {} invariant{}{})",
            f.display(),
            s.name,
            s.faults.len(),
            if s.faults.len() == 1 { "" } else { "s" },
            s.expect.len(),
            if s.expect.len() == 1 { "" } else { "s" },
            if backend.is_none() {
                format!("; runs on {}", runs_on.join(", "))
            } else {
                String::new()
            }
        );
    }
    if output == Output::Json {
        println!("{}", serde_json::to_string_pretty(&found).expect("JSON"));
    }
    if bad > 0 {
        return Err(Failure::Input(format!(
            "{bad} of {} file{} invalid",
            files.len(),
            if files.len() == 1 { "" } else { "s" }
        )));
    }
    Ok(Verdict::Held)
}

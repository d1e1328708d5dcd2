//! `scenario`, `suite`, `explore` and `report`: playing scenarios and showing what happened.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{check_writable, json_to_stdout, write_file, End};
use crate::cli::{
    backend_of, Backend, ExploreArgs, Provider, ReportArgs, ScenarioArgs, SuiteArgs, SummaryArgs,
};
use crate::exit;
use crate::failure::{print_problems, Failure, Verdict};
use kubechaos_core::events::Event;
use kubechaos_core::report::{junit, markdown, summary, terminal, Entry};
use kubechaos_core::scenario;
use kubechaos_engine::backend::BackendError;
use kubechaos_engine::run::{self, Playable};

/// `kubechaos scenario`: play one scenario and judge it (`verbose`: the timeline shows every
/// observed event).
pub fn scenario(args: &ScenarioArgs, verbose: bool) -> End {
    let s = scenario::load(&scenario::resolve(&args.scenario)?)?;
    let outputs: Vec<&Path> = [args.events.as_deref(), args.report.as_deref()]
        .into_iter()
        .chain(args.summaries.files().map(|(p, _)| p))
        .flatten()
        .collect();
    if let Some(twice) = outputs
        .iter()
        .enumerate()
        .find_map(|(i, p)| outputs[..i].contains(p).then_some(p))
    {
        return Err(Failure::Input(format!(
            "kubechaos scenario: {} is given for two reports; expected a file each for --events, --report, --junit, --json and --markdown",
            twice.display()
        )));
    }
    for (path, what) in [
        (args.events.as_deref(), "events"),
        (args.report.as_deref(), "HTML report"),
    ]
    .into_iter()
    .chain(args.summaries.files())
    {
        if let Some(path) = path {
            check_writable(path, what)?;
        }
    }
    if args.summaries.json.as_deref() == Some(Path::new("-")) {
        json_to_stdout()?;
    }
    let kube = args.target.guarded(args.backend)?;
    let mut backend = backend_of(
        args.backend,
        args.seed,
        args.tick_ms,
        args.keep,
        kube.clone(),
    );
    // What the sim plays this file with: the flags, else the file's `sim:`, else the defaults.
    let sim = crate::cli::sim_options(args.seed, args.tick_ms).for_scenario(&s);
    let problems = backend.check(&s);
    if !problems.is_empty() {
        return Err(Failure::of_run(
            &s.source.path,
            BackendError::Unsupported {
                backend: args.backend.name(),
                problems,
            },
        ));
    }
    if args.dry_run {
        println!(
            "kubechaos: scenario {} on {}{}: the plan (nothing is touched)\n",
            s.name,
            args.backend.name(),
            kube.context
                .as_deref()
                .map(|c| format!(", context {c}"))
                .unwrap_or_default()
        );
        print!(
            "{}",
            run::dry_run(&s, &run::Plan::new(&s), backend.as_ref())
        );
        return Ok(Verdict::Held);
    }
    println!(
        "kubechaos: scenario {} ({}) on {}{}",
        s.name,
        s.source.path.display(),
        args.backend.name(),
        if args.backend == Backend::Sim {
            format!(
                ", seed {}{}",
                sim.seed,
                if sim.tick.as_millis() as u64 == kubechaos_engine::backend::sim::DEFAULT_TICK_MS {
                    String::new()
                } else {
                    format!(", step {}", scenario::duration::human(sim.tick))
                }
            )
        } else {
            String::new()
        }
    );
    for line in s.description.lines().filter(|l| !l.trim().is_empty()) {
        println!("  {}", line.trim_end());
    }
    println!(
        "  cluster: {}",
        terminal::cluster_line(&s, args.backend == Backend::Kube)
    );
    println!(
        "  duration: {}\n",
        scenario::duration::human(s.run_duration())
    );
    let mut live = kubechaos_core::report::live::Terminal::stderr("  ");
    let outcome = match run::run(&s, backend.as_mut(), &mut live) {
        Ok(o) => o,
        Err(BackendError::Interrupted { message, events }) => {
            // What was seen up to then, not judged: the timeline and its picture.
            if !events.is_empty()
                && write_run_files(&events, args.events.as_deref(), args.report.as_deref()).is_ok()
            {
                for (path, what) in [(&args.events, "events"), (&args.report, "report")] {
                    if let Some(path) = path {
                        eprintln!(
                            "kubechaos: {what} up to the interruption: {}",
                            path.display()
                        );
                    }
                }
            }
            return Err(Failure::Interrupted(message));
        }
        Err(e) => return Err(Failure::of_run(&s.source.path, e)),
    };
    print!("{}", terminal::timeline(&outcome, verbose));
    println!("\nverdicts:");
    print!("{}", terminal::verdicts(&outcome));
    let held = outcome.verdicts.iter().filter(|v| v.held).count();
    let violated = outcome.verdicts.len() - held;
    println!(
        "\n{held} held, {violated} violated ({} of {} time in {:.2}s)",
        scenario::duration::human(outcome.plan.duration),
        if args.backend == Backend::Sim {
            "virtual"
        } else {
            "real"
        },
        outcome.wall.as_secs_f64()
    );
    write_run_files(
        &outcome.events,
        args.events.as_deref(),
        args.report.as_deref(),
    )?;
    for (path, what) in [(&args.events, "events"), (&args.report, "report")] {
        if let Some(path) = path {
            println!("{what}: {}", path.display());
        }
    }
    let verdict = Verdict::of(outcome.held());
    let entries = [Entry {
        scenario: &s,
        outcome: Ok(&outcome),
        events_path: args.events.as_deref(),
        report_path: args.report.as_deref(),
    }];
    write_reports(
        &entries,
        args.backend,
        sim.seed,
        code_of(verdict),
        &args.summaries,
    )?;
    if verdict == Verdict::Violated {
        println!("replay: {}", replay_command(args, &sim));
    }
    Ok(verdict)
}

/// The exit code the JSON summary records for a verdict.
fn code_of(v: Verdict) -> i32 {
    match v {
        Verdict::Held => exit::HELD,
        Verdict::Violated => exit::VIOLATED,
    }
}

/// The command that plays a run again.
fn replay_command(args: &ScenarioArgs, sim: &kubechaos_engine::backend::sim::SimOptions) -> String {
    let prefix = if std::env::var_os("CARGO").is_some() {
        "cargo run --"
    } else {
        "kubechaos"
    };
    let mut cmd = format!("{prefix} scenario {}", args.scenario);
    if args.backend == Backend::Sim {
        cmd.push_str(&format!(" --seed {}", sim.seed));
        let tick = sim.tick.as_millis() as u64;
        if tick != kubechaos_engine::backend::sim::DEFAULT_TICK_MS {
            cmd.push_str(&format!(" --tick-ms {tick}"));
        }
    } else {
        cmd.push_str(&format!(" --backend {}", args.backend.name()));
    }
    if args.backend == Backend::Kube {
        if let Some(k) = &args.target.kubeconfig {
            cmd.push_str(&format!(" --kubeconfig {}", k.display()));
        }
        if let Some(c) = &args.target.context {
            cmd.push_str(&format!(" --context {c}"));
        }
        for a in &args.target.allow_context {
            cmd.push_str(&format!(" --allow-context {a}"));
        }
        if args.target.provider != Provider::Auto {
            cmd.push_str(&format!(" --provider {}", args.target.provider.name()));
        }
    }
    cmd
}

/// Write a run's events file and its HTML report, where asked.
fn write_run_files(
    timeline: &[Event],
    events: Option<&Path>,
    report: Option<&Path>,
) -> Result<(), Failure> {
    if let Some(path) = events {
        let mut buf = Vec::new();
        kubechaos_core::events::write_jsonl(timeline, &mut buf).expect("writing to memory");
        write_file(path, &buf, "events")?;
    }
    if let Some(path) = report {
        let page = kubechaos_core::report::html::render(timeline)
            .expect("a run's own events start with run-started");
        write_file(path, page.as_bytes(), "HTML report")?;
    }
    Ok(())
}

/// Write the JUnit report, the JSON summary and the Markdown table, where asked.
fn write_reports(
    entries: &[Entry<'_>],
    backend: Backend,
    seed: u64,
    code: i32,
    asked: &SummaryArgs,
) -> Result<(), Failure> {
    if let Some(path) = &asked.junit {
        let xml = junit::render(entries, backend.name(), seed);
        write_file(path, xml.as_bytes(), "JUnit report")?;
        println!("junit: {}", path.display());
    }
    if let Some(path) = &asked.json {
        let json = summary::render(entries, backend.name(), seed, code);
        write_file(path, json.as_bytes(), "JSON summary")?;
        if path != Path::new("-") {
            println!("json: {}", path.display());
        }
    }
    if let Some(path) = &asked.markdown {
        let table = markdown::render(entries, backend.name(), seed);
        write_file(path, table.as_bytes(), "Markdown summary")?;
        println!("markdown: {}", path.display());
    }
    Ok(())
}

/// `kubechaos suite`: every scenario of the paths given, checked first, then played in turn.
pub fn suite(args: &SuiteArgs) -> End {
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from("scenarios")]
    } else {
        args.paths.clone()
    };
    let mut files = Vec::new();
    for p in &paths {
        if p.is_dir() {
            files.extend(scenario::yaml_files(p));
        } else if p.exists() {
            files.push(p.clone());
        } else {
            return Err(Failure::Input(format!(
                "kubechaos suite: {} does not exist; expected scenario files or directories",
                p.display()
            )));
        }
    }
    if files.is_empty() {
        return Err(Failure::Input(format!(
            "kubechaos suite: no scenario files (*.yaml) in {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let kube = args.target.guarded(args.backend)?;
    // Everything is checked before anything runs.
    let mut backend = backend_of(args.backend, args.seed, None, false, kube);
    let mut scenarios = Vec::new();
    let mut bad = false;
    for f in &files {
        match scenario::load(f) {
            Ok(s) => scenarios.push(s),
            Err(e) => {
                Failure::Load(e).report();
                bad = true;
            }
        }
    }
    for (i, problems) in kubechaos_engine::suite::check(&scenarios, backend.as_ref()) {
        let path = &scenarios[i].source.path;
        Failure::of_run(
            path,
            BackendError::Unsupported {
                backend: args.backend.name(),
                problems,
            },
        )
        .report();
        bad = true;
    }
    if bad {
        return Err(Failure::Input(
            "kubechaos suite: nothing was run; fix the files above (exit 2)".to_owned(),
        ));
    }
    for (path, what) in args.summaries.files() {
        if let Some(path) = path {
            check_writable(path, what)?;
        }
    }
    if args.summaries.json.as_deref() == Some(Path::new("-")) {
        json_to_stdout()?;
    }
    for dir in [&args.events_dir, &args.report_dir].into_iter().flatten() {
        std::fs::create_dir_all(dir).map_err(|source| Failure::Write {
            what: "directory",
            path: dir.clone(),
            source,
        })?;
    }
    println!(
        "kubechaos: suite of {} scenario(s) on {}{}",
        scenarios.len(),
        args.backend.name(),
        match (args.backend, args.seed) {
            (Backend::Sim, Some(seed)) => format!(", seed {seed}"),
            (Backend::Sim, None) if scenarios.iter().any(|s| s.sim.seed.is_some()) => {
                ", seed 1 or each file's own (`sim.seed`)".to_owned()
            }
            (Backend::Sim, None) => ", seed 1".to_owned(),
            _ => String::new(),
        }
    );
    let mut files_of: Vec<(Option<PathBuf>, Option<PathBuf>)> = Vec::new();
    let mut live = kubechaos_core::report::live::Terminal::stderr("    ");
    let played =
        kubechaos_engine::suite::run(&scenarios, backend.as_mut(), &mut live, &mut |s, result| {
            let in_dir = |dir: &Option<PathBuf>, ext: &str| {
                dir.as_ref()
                    .filter(|_| result.is_ok())
                    .map(|d| d.join(format!("{}.{ext}", s.name)))
            };
            let (events_path, report_path) = (
                in_dir(&args.events_dir, "jsonl"),
                in_dir(&args.report_dir, "html"),
            );
            match result {
                Ok(o) => {
                    write_run_files(&o.events, events_path.as_deref(), report_path.as_deref())?;
                    let held = o.verdicts.iter().filter(|v| v.held).count();
                    let violated = o.verdicts.len() - held;
                    println!(
                        "  {}  {:<32} {held} held, {violated} violated ({:.1}s)",
                        if violated == 0 { "PASS" } else { "FAIL" },
                        s.name,
                        o.wall.as_secs_f64()
                    );
                    for v in o.verdicts.iter().filter(|v| !v.held) {
                        println!("        {}: {}", v.label, v.message);
                    }
                }
                Err(e) => println!("  ERROR {:<32} {}", s.name, kubechaos_core::error::chain(e)),
            }
            files_of.push((events_path, report_path));
            Ok::<(), Failure>(())
        })?;
    let (held, violated, errors) = (played.held(), played.violated(), played.errors());
    println!(
        "\nsuite: {} scenario(s): {held} held, {violated} violated, {errors} could not run{} ({:.1}s)",
        played.results.len(),
        if played.interrupted { "; interrupted" } else { "" },
        played.wall.as_secs_f64()
    );
    let end = if played.interrupted {
        Err(Failure::Interrupted(
            "the suite was interrupted; everything its run started was stopped".to_owned(),
        ))
    } else if errors > 0 {
        Err(Failure::NotRun(format!(
            "{errors} scenario(s) could not run (see ERROR above)"
        )))
    } else {
        Ok(Verdict::of(violated == 0))
    };
    let code = match &end {
        Ok(v) => code_of(*v),
        Err(f) => f.code(),
    };
    let entries: Vec<Entry<'_>> = scenarios
        .iter()
        .zip(&played.results)
        .zip(&files_of)
        .map(|((s, r), (e, h))| Entry {
            scenario: s,
            outcome: r
                .as_ref()
                .map_err(|e| e as &(dyn std::error::Error + 'static)),
            events_path: e.as_deref(),
            report_path: h.as_deref(),
        })
        .collect();
    write_reports(
        &entries,
        args.backend,
        args.seed.unwrap_or(kubechaos_engine::run::DEFAULT_SEED),
        code,
        &args.summaries,
    )?;
    end
}

/// `kubechaos report`: the HTML page of an events file.
pub fn report(args: &ReportArgs) -> End {
    let path = &args.events;
    let bytes = std::fs::read(path).map_err(|e| {
        Failure::Input(format!(
            "kubechaos report: cannot read {}: {e}; expected an events file written by `kubechaos scenario --events FILE`",
            path.display()
        ))
    })?;
    let text = String::from_utf8(bytes).map_err(|_| {
        Failure::Input(format!(
            "kubechaos report: {}: not text; expected JSON lines as written by `kubechaos scenario --events FILE`",
            path.display()
        ))
    })?;
    let events = kubechaos_core::events::read_jsonl(&text).map_err(|e| {
        Failure::Input(format!(
            "{}:{}:{}: not a kubechaos event: {}; expected one JSON object per line as written by `kubechaos scenario --events FILE`",
            path.display(),
            e.line,
            e.column,
            e.message
        ))
    })?;
    let page = kubechaos_core::report::html::render(&events).map_err(|e| match e {
        kubechaos_core::report::html::ModelError::NoRunStarted => Failure::Input(format!(
            "{}:1:1: no run-started event; expected an events file written by `kubechaos scenario --events FILE` (it starts with one)",
            path.display()
        )),
    })?;
    let out = args
        .output
        .clone()
        .unwrap_or_else(|| path.with_extension("html"));
    if out == *path {
        return Err(Failure::Input(format!(
            "kubechaos report: the report would overwrite its events file {}; give another with -o FILE",
            path.display()
        )));
    }
    write_file(&out, page.as_bytes(), "HTML report")?;
    let judged = events.iter().any(|e| {
        matches!(
            e.kind,
            kubechaos_core::events::EventKind::InvariantJudged { .. }
        )
    });
    let interrupted = events
        .iter()
        .find(|e| matches!(e.kind, kubechaos_core::events::EventKind::RunInterrupted {}));
    if let Some(e) = interrupted {
        eprintln!(
            "kubechaos report: {} is of a run interrupted at t={}: the page shows its timeline to there, not judged",
            path.display(),
            kubechaos_core::events::fmt_ms(e.t_ms)
        );
    } else if !judged {
        eprintln!(
            "kubechaos report: {} has no verdicts (written before kubechaos recorded them); the page shows the timeline without them",
            path.display()
        );
    }
    println!("report: {}", out.display());
    Ok(Verdict::Held)
}

/// `kubechaos explore`: generated schedules on the sim, each violation shrunk and written.
pub fn explore(args: &ExploreArgs) -> End {
    use std::io::IsTerminal;
    let path = scenario::resolve_in(&args.topology, "topologies")?;
    let s = scenario::load(&path)?;
    let problems = Playable::check(&kubechaos_engine::backend::sim::Sim::default(), &s);
    if !problems.is_empty() {
        return Err(Failure::of_run(
            &s.source.path,
            BackendError::Unsupported {
                backend: "sim",
                problems,
            },
        ));
    }
    // The file's own lines (its cluster and invariants, as written) head each file written.
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let topo = kubechaos_engine::explore::Topology::new(&s, &text).map_err(|problems| {
        print_problems(&s.source.path, &problems);
        Failure::Input(format!(
            "kubechaos explore: {} cannot be a topology for generated faults",
            path.display()
        ))
    })?;
    // Findings are replayed where the topology can run: refused before the exploration.
    let confirm = args.confirm.map(|_| {
        kubechaos_engine::backend::local::run::Local::new(
            kubechaos_engine::backend::local::run::LocalOptions { keep: false },
        )
    });
    if let Some(local) = &confirm {
        let problems = local.check(&s);
        if !problems.is_empty() {
            print_problems(&s.source.path, &problems);
            return Err(Failure::Input(format!(
                "kubechaos explore: --confirm local: {} cannot run on the local backend, so its findings could not be confirmed there",
                path.display()
            )));
        }
    }
    if !s.faults.is_empty() {
        println!(
            "kubechaos explore: {} has {} fault step(s); they are ignored: the faults are generated",
            path.display(),
            s.faults.len()
        );
    }
    let opts = kubechaos_engine::explore::ExploreOptions {
        runs: args.runs,
        seed: args.seed,
        max_faults: args.max_faults as usize,
        shard: args.shard.unwrap_or((0, 1)),
        jobs: args
            .jobs
            .unwrap_or_else(|| kubechaos_engine::explore::ExploreOptions::default().jobs)
            .max(1),
        tick_ms: args.tick_ms,
        max_shrink_runs: args.max_shrink_runs,
    };
    let mut command = format!(
        "kubechaos explore {} --runs {} --seed {} --max-faults {}",
        path.display(),
        args.runs,
        args.seed,
        args.max_faults
    );
    if let Some((i, n)) = args.shard {
        command.push_str(&format!(" --shard {i}/{n}"));
    }
    println!(
        "kubechaos explore: topology {} ({}), {} run(s){}, seed {}, up to {} fault(s) each, {} at once",
        s.name,
        path.display(),
        (0..opts.runs).filter(|k| k % opts.shard.1 == opts.shard.0).count(),
        args.shard
            .map(|(i, n)| format!(" (shard {i}/{n} of {})", opts.runs))
            .unwrap_or_default(),
        opts.seed,
        opts.max_faults,
        opts.jobs
    );
    let tty = std::io::stderr().is_terminal() && std::env::var_os("CI").is_none();
    let every = if tty {
        Duration::from_millis(250)
    } else {
        Duration::from_secs(10)
    };
    let mut last: Option<(Duration, usize)> = None;
    let mut report = move |done: usize, total: usize, bad: usize, t: Duration| {
        let due = match last {
            None => true,
            Some((_, d)) if d == done => false,
            Some((l, _)) => t >= l + every || done == total,
        };
        if !due {
            return;
        }
        last = Some((t, done));
        let rate = done as f64 / t.as_secs_f64().max(1e-3);
        let line =
            format!("explore: {done}/{total} runs, {rate:.1} runs/s, {bad} violated an invariant");
        if tty {
            eprint!("\r{line}\x1b[K");
            if done == total {
                eprintln!();
            }
        } else {
            eprintln!("{line}");
        }
    };
    // What is made for the findings goes again however explore ends, if nothing was written
    // there (by it, or by another shard).
    let _made_out = writable_out(&args.out)?;
    let summary =
        kubechaos_engine::explore::explore(&topo, &opts, &args.out, &command, &mut report)?;
    println!(
        "\n{} run(s) in {:.1}s ({:.1} runs/s): {} violated an invariant",
        summary.runs,
        summary.wall.as_secs_f64(),
        summary.runs as f64 / summary.wall.as_secs_f64().max(1e-3),
        summary.violations
    );
    if summary.found.is_empty() {
        println!("nothing found");
        return Ok(Verdict::Held);
    }
    for f in &summary.found {
        println!(
            "\nFOUND  {} (case {}; shrunk from {} fault(s) to {} in {} run(s))\n  {}",
            f.label,
            f.case,
            f.original_faults,
            f.schedule.len(),
            f.shrink_runs,
            f.path.display()
        );
        let mut steps: Vec<&kubechaos_engine::explore::GenFault> = f.schedule.iter().collect();
        steps.sort_by_key(|g| g.at_s);
        for g in steps {
            println!("    - {}", g.text());
        }
        println!("  violation: {}", f.message);
        let default = kubechaos_engine::backend::sim::DEFAULT_TICK_MS;
        println!(
            "  robustness: fails at {} of {} seeds ({}–{}) at {}",
            f.robust.0,
            f.robust.1,
            opts.seed,
            opts.seed + kubechaos_engine::explore::ROBUSTNESS_SEEDS - 1,
            if f.step_ms == default {
                format!("the default step ({default}ms)")
            } else {
                format!(
                    "the exploration's step ({}ms) only: at the default step ({default}ms) it holds; its file keeps the coarse step",
                    f.step_ms
                )
            }
        );
        println!(
            "  replay: kubechaos scenario {} (its seed and step are in the file)",
            f.path.display()
        );
    }
    if let Some(mut local) = confirm {
        for f in &summary.found {
            confirm_on(&mut local, f)?;
        }
    }
    Ok(Verdict::Violated)
}

/// That the findings can be written to `out`, checked before the exploration (it may run for
/// hours before its first finding): the directory is made if missing and a file of this check's
/// own is written in it and removed. What was made for it is removed again when the guard
/// returned goes (on error too), if still empty. The shards of an Indexed Job share `out` (a
/// volume) and each runs as PID 1 of its container: a file named by the PID alone was one file
/// for all of them, and one shard's removal made another's fail ("No such file or directory",
/// seen on kind in `ci/kubernetes/explore-job.yaml`'s eight shards).
fn writable_out(out: &Path) -> Result<MadeOut, Failure> {
    let made = MadeOut {
        out: out.to_owned(),
        top: out
            .ancestors()
            .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
            .last()
            .map(Path::to_owned),
    };
    std::fs::create_dir_all(out)
        .and_then(|()| own_file_in(out))
        .and_then(|probe| std::fs::remove_file(&probe))
        .map_err(|e| {
            Failure::Input(format!(
                "kubechaos explore: --out {}: its findings could not be written there ({e}); \
                 name a directory this user can write to (it is made if missing)",
                out.display()
            ))
        })?;
    Ok(made)
}

/// Make a new empty file in `dir` that nobody else made (`create_new`: another process, or
/// another shard with the same PID, gets a name of its own); returns its path.
fn own_file_in(dir: &Path) -> std::io::Result<PathBuf> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut n = 0u32;
    loop {
        let path = dir.join(format!(
            ".kubechaos-explore-{}-{nanos}-{n}",
            std::process::id()
        ));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(_) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
            Err(e) => return Err(e),
        }
    }
}

/// The directories made for explore's `--out`: `out` and its ancestors up to `top` (none when
/// `out` existed). Dropped, it removes those still empty, innermost first.
struct MadeOut {
    out: PathBuf,
    top: Option<PathBuf>,
}

impl Drop for MadeOut {
    fn drop(&mut self) {
        let Some(top) = &self.top else { return };
        for dir in self.out.ancestors() {
            if std::fs::remove_dir(dir).is_err() || dir == top {
                break;
            }
        }
    }
}

/// Replay finding `f` on the local control plane and label it, in the report and in its file:
/// confirmed when the invariant it violates on the sim fails there too.
fn confirm_on(
    local: &mut kubechaos_engine::backend::local::run::Local,
    f: &kubechaos_engine::explore::Found,
) -> End {
    let s = scenario::load(&f.path)?;
    println!(
        "\nCONFIRM  {} on local ({} of real time)",
        f.path.display(),
        scenario::duration::human(s.run_duration())
    );
    let mut live = kubechaos_core::report::live::Terminal::stderr("  ");
    let outcome = match run::run(&s, local, &mut live) {
        Ok(o) => o,
        Err(BackendError::Interrupted { message, .. }) => {
            return Err(Failure::Interrupted(message))
        }
        Err(e) => return Err(Failure::of_run(&s.source.path, e)),
    };
    print!("{}", terminal::verdicts(&outcome));
    let judged = kubechaos_engine::explore::Confirmation::of(
        &f.label,
        outcome.verdicts.iter().map(|v| (v.label.as_str(), v.held)),
    );
    let said = judged.describe(&f.label, "the local control plane");
    println!("  on local: {said}");
    let text = std::fs::read_to_string(&f.path).unwrap_or_default();
    let line = format!("`--confirm local`: {said}.");
    write_file(
        &f.path,
        kubechaos_engine::explore::with_header_line(&text, &line).as_bytes(),
        "finding",
    )?;
    Ok(Verdict::Held)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The eight shards of the explore Job check one shared `--out` at once, each as PID 1 of
    /// its container: here threads of one process (one PID), many times over; each check must
    /// pass and leave nothing behind.
    #[test]
    fn shards_sharing_an_out_directory_check_it_at_once_without_failing_each_other() {
        let dir = tempfile::tempdir().unwrap();
        for _ in 0..50 {
            let checks: Vec<_> = (0..8)
                .map(|_| {
                    let out = dir.path().to_owned();
                    std::thread::spawn(move || {
                        writable_out(&out).map(drop).map_err(|e| format!("{e:?}"))
                    })
                })
                .collect();
            for c in checks {
                c.join().unwrap().unwrap();
            }
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}

//! `kubechaos explore`: generated fault schedules against a topology on the sim, and the
//! smallest schedule that still breaks an invariant, written out as an ordinary scenario file.
//!
//! A topology is a scenario file whose `cluster:` and `expect:` are kept; its `faults:` are
//! replaced by generated ones. Schedules are proptest strategies of the scenario model's own
//! actions (API-server stops, crashes and restarts; kills; removals, partitions, delays and
//! losses on a link to the API server, and Lease updates answered with errors, with `for:`
//! durations; leader-targeted or by replica), played as model values (no YAML in between), so
//! shrinking comes from proptest's value trees: fewer faults, shorter durations, earlier times,
//! simpler kinds. Only a violation's shrunk schedule is written out as text.
//!
//! Determinism: case K's schedule is drawn from an RNG seeded with (seed, K) alone, and each
//! case runs on the sim with the same seed, so a case is the same wherever it runs. `--shard I/N`
//! takes the cases K ≡ I (mod N): N shards together run exactly the cases of one unsharded
//! exploration.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::strategy::{BoxedStrategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use crate::backend::sim::{Sim, SimOptions};
use crate::run;
use kubechaos_core::error::SyntaxError;
use kubechaos_core::scenario::duration::human;
use kubechaos_core::scenario::validate::process_name;
use kubechaos_core::scenario::{
    self, Action, ApiErrors, Delay, Loss, Partition, Pos, ProcessOp, Ratio, Scenario, Selector,
    Step, Target,
};

/// Virtual milliseconds per simulation step while exploring: five times the sim's default,
/// which keeps the shipped scenarios' and traps' verdicts (checked) and runs about three times
/// faster (docs/benchmarks.md). The files it writes say to replay with it.
pub const TICK_MS: u64 = 100;

/// How to explore.
#[derive(Clone, Debug)]
pub struct ExploreOptions {
    /// Cases in the whole exploration (every shard together).
    pub runs: usize,
    /// Seed of the schedules and of every simulated run.
    pub seed: u64,
    /// At most this many faults in one schedule.
    pub max_faults: usize,
    /// This shard: (I, N) takes the cases K with K mod N = I.
    pub shard: (usize, usize),
    /// Worker threads.
    pub jobs: usize,
    /// Virtual milliseconds per simulation step.
    pub tick_ms: u64,
    /// At most this many runs to shrink one violation.
    pub max_shrink_runs: usize,
}

impl Default for ExploreOptions {
    fn default() -> Self {
        ExploreOptions {
            runs: 200,
            seed: run::DEFAULT_SEED,
            max_faults: 3,
            shard: (0, 1),
            jobs: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            tick_ms: TICK_MS,
            max_shrink_runs: 300,
        }
    }
}

/// One generated fault: a step of the scenario model without an id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenFault {
    /// Seconds from the start.
    pub at_s: u32,
    /// What it does.
    pub(crate) action: Action,
    /// Seconds until its undo (used by the actions that have one).
    pub(crate) for_s: u32,
}

impl GenFault {
    /// As a step of the scenario model.
    fn step(&self) -> Step {
        Step {
            at: Duration::from_secs(self.at_s.into()),
            id: None,
            for_: self
                .action
                .undoable()
                .then(|| Duration::from_secs(self.for_s.into())),
            action: self.action.clone(),
            pos: Pos::default(),
            target_pos: Vec::new(),
        }
    }

    /// As a step of a scenario file: `{at: 5s, partition: [agent/a/0, api-server], for: 10s}`.
    pub fn text(&self) -> String {
        let step = self.step();
        match step.for_ {
            Some(d) => format!(
                "{{at: {}, {}, for: {}}}",
                human(step.at),
                step.action,
                human(d)
            ),
            None => format!("{{at: {}, {}}}", human(step.at), step.action),
        }
    }
}

/// What schedules can name in a topology, and how they are written.
#[derive(Clone, Debug)]
pub struct Topology {
    /// The topology's name (its file name).
    pub(crate) name: String,
    /// The topology as a scenario (its faults and duration dropped).
    scenario: Scenario,
    /// Its lines minus `name`, `description`, `faults` and `duration`.
    kept: String,
    /// Targets of kill and remove.
    kill_pool: Vec<Target>,
    /// Single-process targets of partitions.
    partition_pool: Vec<Target>,
    /// Links between API servers and etcd that partitions may cut, when the topology has several
    /// of either: one API server from every member, every API server from one member.
    etcd_links: Vec<(Target, Target)>,
    /// Faults start within this many seconds.
    horizon_s: u32,
}

/// The top-level keys a generated file writes itself (a topology's `duration` is its horizon).
const REPLACED: [&str; 5] = ["name", "description", "faults", "duration", "sim"];

impl Topology {
    /// The topology of a validated scenario file (its faults are ignored). Errors: invariants
    /// anchored with `after:` (a generated schedule has no step ids).
    pub fn new(s: &Scenario, text: &str) -> Result<Topology, Vec<(scenario::Pos, String)>> {
        let problems: Vec<_> = s
            .expect
            .iter()
            .filter(|i| i.value.after().is_some())
            .map(|i| {
                (i.pos, format!(
                    "`{}` is anchored with `after:`, and generated schedules have no step ids; expected invariants anchored at the last fault (no `after:`) in a topology",
                    i.value.label()
                ))
            })
            .collect();
        if !problems.is_empty() {
            return Err(problems);
        }
        let mut kept = String::new();
        let mut skipping = false;
        let mut seen_key = false;
        for line in text.lines() {
            if !seen_key && (line.starts_with('#') || line.trim().is_empty()) {
                // The topology's own header comments describe the topology, not the file.
                continue;
            }
            let top = !line.starts_with([' ', '\t', '#', '-']) && !line.is_empty();
            if top {
                seen_key = true;
                skipping = REPLACED
                    .iter()
                    .any(|k| line.strip_prefix(k).is_some_and(|r| r.starts_with(':')));
            }
            if !skipping {
                kept.push_str(line);
                kept.push('\n');
            }
        }
        let mut kill_pool = Vec::new();
        let mut partition_pool = Vec::new();
        let mut group = |target: &dyn Fn(Selector) -> Target,
                         replicas: u32,
                         indexed: bool,
                         partitions: bool| {
            if replicas == 0 {
                return;
            }
            kill_pool.push(target(Selector::All));
            kill_pool.push(target(Selector::Leader));
            if partitions {
                partition_pool.push(target(Selector::Leader));
            }
            if indexed {
                for i in 0..replicas {
                    kill_pool.push(target(Selector::Index(i)));
                    if partitions {
                        partition_pool.push(target(Selector::Index(i)));
                    }
                }
            }
        };
        for (c, spec) in &s.cluster.components {
            group(
                &|sel| Target::Component(*c, sel),
                spec.replicas,
                !s.cluster.self_hosted,
                !s.cluster.self_hosted,
            );
        }
        for a in &s.cluster.agents {
            group(
                &|sel| Target::Agent(a.name.clone(), sel),
                a.replicas,
                true,
                true,
            );
        }
        for n in 0..s.cluster.nodes {
            partition_pool.push(Target::Node(process_name("node", n)));
        }
        // Several API servers or etcd members: each can be killed or removed alone (etcd's raft
        // leader too), and cut off from the others' side.
        let mut etcd_links = Vec::new();
        if s.cluster.api_servers > 1 {
            for i in 0..s.cluster.api_servers {
                kill_pool.push(Target::ApiServer(Selector::Index(i)));
                etcd_links.push((Target::ApiServer(Selector::Index(i)), Target::ETCD));
            }
        }
        if s.cluster.etcd.members > 1 {
            kill_pool.push(Target::Etcd(Selector::Leader));
            for i in 0..s.cluster.etcd.members {
                kill_pool.push(Target::Etcd(Selector::Index(i)));
                etcd_links.push((Target::API_SERVER, Target::Etcd(Selector::Index(i))));
            }
        }
        let horizon = s.duration.unwrap_or(Duration::from_secs(180));
        Ok(Topology {
            name: s.name.clone(),
            scenario: Scenario {
                faults: Vec::new(),
                duration: None,
                ..s.clone()
            },
            kept,
            kill_pool,
            partition_pool,
            etcd_links,
            horizon_s: (horizon.as_secs() as u32).max(10),
        })
    }

    /// The strategy of schedules: 1 to `max_faults` faults.
    pub(crate) fn schedules(&self, max_faults: usize) -> BoxedStrategy<Vec<GenFault>> {
        let kills = self.kill_pool.len();
        let parts = self.partition_pool.len();
        let mut kinds: Vec<BoxedStrategy<Action>> = vec![
            Just(Action::ApiServer(ProcessOp::Stop)).boxed(),
            Just(Action::ApiServer(ProcessOp::Crash)).boxed(),
            Just(Action::ApiServer(ProcessOp::Restart)).boxed(),
        ];
        if kills > 0 {
            let pool = self.kill_pool.clone();
            kinds.push(
                (0..kills)
                    .prop_map(move |t| Action::Kill(pool[t].clone()))
                    .boxed(),
            );
            let pool = self.kill_pool.clone();
            kinds.push(
                (0..kills)
                    .prop_map(move |t| Action::Remove(pool[t].clone()))
                    .boxed(),
            );
        }
        if parts > 0 {
            // A link between one process of the pool and the API server, one way or both.
            let pool = self.partition_pool.clone();
            let link = move |t: usize, oneway: bool| Partition {
                a: pool[t].clone(),
                b: Target::API_SERVER,
                oneway,
                reset: false,
            };
            let to_api = link.clone();
            kinds.push(
                (0..parts, any::<bool>())
                    .prop_map(move |(t, oneway)| Action::Partition(to_api(t, oneway)))
                    .boxed(),
            );
            // Degradation: a slow or lossy link to the API server.
            let to_api = link.clone();
            kinds.push(
                (0..parts, any::<bool>(), 1u64..=15)
                    .prop_map(move |(t, oneway, secs)| {
                        Action::Delay(Delay {
                            link: to_api(t, oneway),
                            latency: Duration::from_secs(secs),
                            jitter: Duration::ZERO,
                        })
                    })
                    .boxed(),
            );
            kinds.push(
                (0..parts, any::<bool>(), 1u32..=9)
                    .prop_map(move |(t, oneway, tenths)| {
                        Action::Loss(Loss {
                            link: link(t, oneway),
                            ratio: Ratio::new(f64::from(tenths) / 10.0),
                        })
                    })
                    .boxed(),
            );
        }
        if !self.etcd_links.is_empty() {
            // An API server cut off from etcd, or a member cut off from the API servers.
            let pool = self.etcd_links.clone();
            kinds.push(
                (0..pool.len(), any::<bool>())
                    .prop_map(move |(t, oneway)| {
                        Action::Partition(Partition {
                            a: pool[t].0.clone(),
                            b: pool[t].1.clone(),
                            oneway,
                            reset: false,
                        })
                    })
                    .boxed(),
            );
        }
        // Lease updates answered with 500 (or 429 with Retry-After), for some or all.
        kinds.push(
            (1u32..=10, any::<bool>())
                .prop_map(|(tenths, throttled)| {
                    Action::ApiErrors(ApiErrors {
                        status: if throttled { 429 } else { 500 },
                        ratio: Ratio::new(f64::from(tenths) / 10.0),
                        retry_after: throttled.then(|| Duration::from_secs(5)),
                        verbs: vec!["update".into()],
                        resources: vec!["leases".into()],
                        namespaces: Vec::new(),
                        users: Vec::new(),
                    })
                })
                .boxed(),
        );
        let kind = proptest::strategy::Union::new(kinds);
        // Times shrink towards 5s (leaders have settled), durations towards 1s.
        let fault =
            (5..self.horizon_s, kind, 1u32..=90).prop_map(|(at_s, action, for_s)| GenFault {
                at_s,
                action,
                for_s,
            });
        proptest::collection::vec(fault, 1..=max_faults.max(1)).boxed()
    }

    /// The schedule's faults in time order, and its name (`TOPOLOGY-HASH`, from their text).
    fn ordered<'a>(&self, schedule: &'a [GenFault]) -> (Vec<&'a GenFault>, String) {
        let mut faults: Vec<&GenFault> = schedule.iter().collect();
        faults.sort_by_key(|f| f.at_s);
        let steps: Vec<String> = faults.iter().map(|f| f.text()).collect();
        let name = format!("{}-{:08x}", self.name, fnv(&steps.join("\n")) as u32);
        (faults, name)
    }

    /// The scenario of a schedule, as the model: the topology with these faults.
    pub(crate) fn scenario(&self, schedule: &[GenFault]) -> Scenario {
        let (faults, name) = self.ordered(schedule);
        let mut s = self.scenario.clone();
        s.source.path = PathBuf::from(format!("{name}.yaml"));
        s.name = name;
        s.faults = faults.iter().map(|f| f.step()).collect();
        s
    }

    /// The scenario file of a schedule (faults in time order), and its name
    /// (`TOPOLOGY-HASH`). `header` goes first, as comments; `sim` (a `sim:` line, or nothing)
    /// last.
    pub(crate) fn render(
        &self,
        schedule: &[GenFault],
        header: &str,
        sim: &str,
    ) -> (String, String) {
        let (faults, name) = self.ordered(schedule);
        let mut out = String::new();
        for line in header.lines() {
            let _ = writeln!(out, "# {line}");
        }
        let _ = writeln!(out, "name: {name}");
        let _ = writeln!(
            out,
            "description: |\n  Generated by `kubechaos explore` from the topology {}, then shrunk.",
            self.name
        );
        out.push_str(&self.kept);
        out.push_str("faults:\n");
        for f in faults {
            let _ = writeln!(out, "  - {}", f.text());
        }
        if !sim.is_empty() {
            let _ = writeln!(out, "{sim}");
        }
        (name, out)
    }
}

/// The `sim:` line of a finding's file: its seed, and its step unless it is the default.
fn sim_settings(seed: u64, tick_ms: u64) -> String {
    if tick_ms == crate::backend::sim::DEFAULT_TICK_MS {
        format!("sim: {{seed: {seed}}}")
    } else {
        format!("sim: {{seed: {seed}, step: {tick_ms}ms}}")
    }
}

/// FNV-1a, for short stable names.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    })
}

/// The RNG of case `k`: a function of (seed, k) alone.
fn case_rng(seed: u64, k: usize) -> TestRng {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&(k as u64).to_le_bytes());
    bytes[16..24].copy_from_slice(b"kubechao");
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

/// The schedule tree of case `k`.
fn case_tree(
    topo: &Topology,
    opts: &ExploreOptions,
    k: usize,
) -> Box<dyn ValueTree<Value = Vec<GenFault>>> {
    let config = Config {
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(config, case_rng(opts.seed, k));
    Box::new(
        topo.schedules(opts.max_faults)
            .new_tree(&mut runner)
            .expect("schedule strategies do not reject"),
    )
}

/// The outcome of one schedule: the first violated invariant's label and text, if any.
pub(crate) fn play(
    topo: &Topology,
    schedule: &[GenFault],
    opts: &ExploreOptions,
) -> Result<Option<(String, String)>, ExploreError> {
    let s = topo.scenario(schedule);
    let problems = scenario::validate::validate(&s);
    if !problems.is_empty() {
        let (_, text) = topo.render(schedule, "", "");
        return Err(ExploreError::InvalidSchedule {
            problems: format!("{problems:?}"),
            text,
        });
    }
    let mut sim = Sim::new(SimOptions {
        seed: opts.seed,
        tick: Duration::from_millis(opts.tick_ms),
        ..Default::default()
    });
    let o = run::run(&s, &mut sim, &mut |_: &str| {}).map_err(ExploreError::Run)?;
    Ok(o.verdicts
        .into_iter()
        .find(|v| !v.held)
        .map(|v| (v.label, v.message)))
}

/// Why exploring stopped.
#[derive(Debug, thiserror::Error)]
pub enum ExploreError {
    /// A generated schedule did not validate: a kubechaos bug.
    #[error("a generated schedule is not a valid scenario (a kubechaos bug): {problems}\n{text}")]
    InvalidSchedule {
        /// The validation problems.
        problems: String,
        /// The schedule as YAML.
        text: String,
    },
    /// The sim could not run a generated schedule.
    #[error("the sim could not run a generated schedule")]
    Run(#[source] crate::backend::BackendError),
    /// A found scenario could not be written.
    #[error("cannot {what} {}", path.display())]
    Write {
        /// `create`, `write`.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A violation found and shrunk.
#[derive(Clone, Debug)]
pub struct Found {
    /// The case that found it.
    pub case: usize,
    /// The invariant it violates.
    pub label: String,
    /// Faults in the case as generated.
    pub original_faults: usize,
    /// The shrunk schedule.
    pub schedule: Vec<GenFault>,
    /// The violation text of the shrunk schedule.
    pub message: String,
    /// Runs the shrinking took.
    pub shrink_runs: usize,
    /// Where its scenario file was written.
    pub path: PathBuf,
    /// The step it fails at, as the file carries it (`sim.step`): the default, unless the
    /// finding fails only at the exploration's coarser step.
    pub step_ms: u64,
    /// How robust it is: at how many of the seeds tried (the exploration's and the nine after
    /// it) it fails at that step.
    pub robust: (usize, usize),
}

/// Seeds a finding is played with to say how robust it is.
pub const ROBUSTNESS_SEEDS: u64 = 10;

/// What an exploration did.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Cases run by this shard.
    pub runs: usize,
    /// Cases that violated an invariant.
    pub violations: usize,
    /// Wall time of the exploration (without shrinking).
    pub wall: Duration,
    /// One per distinct violated invariant: shrunk and written.
    pub found: Vec<Found>,
}

/// Shrink case `k`'s schedule while it still violates `label`.
fn shrink(
    topo: &Topology,
    opts: &ExploreOptions,
    k: usize,
    label: &str,
) -> Result<(Vec<GenFault>, String, usize), ExploreError> {
    let mut tree = case_tree(topo, opts, k);
    let mut best = tree.current();
    let mut message = String::new();
    let mut runs = 0;
    let mut last_failed = true;
    while runs < opts.max_shrink_runs {
        let moved = if last_failed {
            tree.simplify()
        } else {
            tree.complicate()
        };
        if !moved {
            break;
        }
        runs += 1;
        let candidate = tree.current();
        match play(topo, &candidate, opts)? {
            Some((l, m)) if l == label => {
                best = candidate;
                message = m;
                last_failed = true;
            }
            _ => last_failed = false,
        }
    }
    if message.is_empty() {
        // Nothing smaller failed: the original's text.
        message = play(topo, &best, opts)?.map(|(_, m)| m).unwrap_or_default();
    }
    Ok((best, message, runs))
}

/// Explore: run this shard's cases on `opts.jobs` threads, then shrink the first violation of
/// each invariant and write it to `out`. `progress` is told about once a second.
pub fn explore(
    topo: &Topology,
    opts: &ExploreOptions,
    out: &Path,
    command: &str,
    progress: &mut (dyn FnMut(usize, usize, usize, Duration) + Send),
) -> Result<Summary, ExploreError> {
    let (shard, shards) = opts.shard;
    let cases: Vec<usize> = (0..opts.runs).filter(|k| k % shards == shard).collect();
    let next = AtomicUsize::new(0);
    let results: Mutex<BTreeMap<usize, Option<(String, String)>>> = Mutex::default();
    let failure: Mutex<Option<ExploreError>> = Mutex::default();
    let started = Instant::now();
    let progress = Mutex::new(progress);
    std::thread::scope(|scope| {
        for _ in 0..opts.jobs.max(1) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= cases.len() || failure.lock().expect("lock").is_some() {
                    return;
                }
                let k = cases[i];
                let schedule = case_tree(topo, opts, k).current();
                match play(topo, &schedule, opts) {
                    Ok(r) => {
                        let mut res = results.lock().expect("lock");
                        res.insert(k, r);
                        let done = res.len();
                        let bad = res.values().filter(|r| r.is_some()).count();
                        drop(res);
                        if let Ok(mut p) = progress.try_lock() {
                            (p)(done, cases.len(), bad, started.elapsed());
                        }
                    }
                    Err(e) => {
                        *failure.lock().expect("lock") = Some(e);
                        return;
                    }
                }
            });
        }
    });
    if let Some(e) = failure.into_inner().expect("lock") {
        return Err(e);
    }
    let results = results.into_inner().expect("lock");
    let wall = started.elapsed();
    (progress.into_inner().expect("lock"))(
        results.len(),
        cases.len(),
        results.values().filter(|r| r.is_some()).count(),
        wall,
    );
    let mut summary = Summary {
        runs: results.len(),
        violations: results.values().filter(|r| r.is_some()).count(),
        wall,
        found: Vec::new(),
    };
    // The first case of each violated invariant, in case order.
    let mut firsts: BTreeMap<String, usize> = BTreeMap::new();
    for (k, r) in &results {
        if let Some((label, _)) = r {
            firsts.entry(label.clone()).or_insert(*k);
        }
    }
    let mut firsts: Vec<(usize, String)> = firsts.into_iter().map(|(l, k)| (k, l)).collect();
    firsts.sort();
    if !firsts.is_empty() {
        std::fs::create_dir_all(out).map_err(|source| ExploreError::Write {
            what: "create",
            path: out.to_owned(),
            source,
        })?;
    }
    let default_step = crate::backend::sim::DEFAULT_TICK_MS;
    let fine = ExploreOptions {
        tick_ms: default_step,
        ..opts.clone()
    };
    let fails = |o: &ExploreOptions, schedule: &[GenFault], label: &str| {
        play(topo, schedule, o).map(|r| r.is_some_and(|(l, _)| l == label))
    };
    for (k, label) in firsts {
        let original = case_tree(topo, opts, k).current();
        let original_faults = original.len();
        let (mut schedule, mut message, mut shrink_runs) = shrink(topo, opts, k, &label)?;
        // A file someone commits must fail as it is played: at the default step. A finding
        // that fails only at the coarse step is shrunk again at the default one, from the case
        // as generated; one that the default step never fails keeps the coarse step in its file.
        let mut at = opts.clone();
        if opts.tick_ms != default_step && !fails(&fine, &schedule, &label)? {
            if fails(&fine, &original, &label)? {
                let (s2, m2, r2) = shrink(topo, &fine, k, &label)?;
                schedule = s2;
                message = m2;
                shrink_runs += r2;
                at = fine.clone();
            }
        } else {
            at = fine.clone();
        }
        let robust = (0..ROBUSTNESS_SEEDS)
            .map(|i| {
                let o = ExploreOptions {
                    seed: opts.seed + i,
                    ..at.clone()
                };
                fails(&o, &schedule, &label)
            })
            .collect::<Result<Vec<bool>, _>>()?;
        let robust = (robust.iter().filter(|f| **f).count(), robust.len());
        let (name, _) = topo.render(&schedule, "", &sim_settings(opts.seed, at.tick_ms));
        let path = out.join(format!("{name}.yaml"));
        let step_note = if at.tick_ms == default_step {
            format!("It fails at the default step ({default_step}ms)")
        } else {
            format!(
                "It fails only at the exploration's step ({}ms), which its file keeps: at the default step ({default_step}ms) it holds",
                at.tick_ms
            )
        };
        let header = format!(
            "Found by `{command}` (kubechaos {}): case {k} violated `{label}`;\nshrunk from {original_faults} fault(s) to {} in {shrink_runs} run(s).\n{step_note}, at {} of {} seeds ({}–{}).\nReplay: kubechaos scenario {} (its seed and step are in the file, `sim:`)",
            env!("CARGO_PKG_VERSION"),
            schedule.len(),
            robust.0,
            robust.1,
            opts.seed,
            opts.seed + ROBUSTNESS_SEEDS - 1,
            path.display(),
        );
        let (_, text) = topo.render(&schedule, &header, &sim_settings(opts.seed, at.tick_ms));
        std::fs::write(&path, text).map_err(|source| ExploreError::Write {
            what: "write",
            path: path.clone(),
            source,
        })?;
        summary.found.push(Found {
            case: k,
            label,
            original_faults,
            schedule,
            message,
            shrink_runs,
            path,
            step_ms: at.tick_ms,
            robust,
        });
    }
    Ok(summary)
}

/// `I/N` as `--shard` takes it.
pub fn parse_shard(s: &str) -> Result<(usize, usize), SyntaxError> {
    let (i, n) = s
        .split_once('/')
        .ok_or_else(|| SyntaxError(format!("`{s}`: expected I/N, e.g. 0/4")))?;
    let whole = |_| SyntaxError(format!("`{s}`: expected I/N with whole numbers, e.g. 0/4"));
    let i: usize = i.trim().parse().map_err(whole)?;
    let n: usize = n.trim().parse().map_err(whole)?;
    if n == 0 || i >= n {
        return Err(SyntaxError(format!(
            "`{s}`: expected 0 <= I < N, e.g. 0/4 … 3/4"
        )));
    }
    Ok((i, n))
}

/// What a replay of a finding on a real backend says of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Confirmation {
    /// The invariant it violates on the sim failed there too.
    Confirmed,
    /// It held there; `failed`: the invariants that failed instead, if any.
    NotConfirmed {
        /// Labels of the invariants that failed there.
        failed: Vec<String>,
    },
}

impl Confirmation {
    /// Judge a replay by its verdicts (label, held): confirmed when the finding's invariant
    /// (`label`) failed in it.
    pub fn of<'a>(label: &str, verdicts: impl IntoIterator<Item = (&'a str, bool)>) -> Self {
        let failed: Vec<String> = verdicts
            .into_iter()
            .filter(|(_, held)| !held)
            .map(|(l, _)| l.to_owned())
            .collect();
        if failed.iter().any(|l| l == label) {
            Confirmation::Confirmed
        } else {
            Confirmation::NotConfirmed { failed }
        }
    }

    /// One line for the report and the file: `confirmed: ...` or `not confirmed: ...`.
    pub fn describe(&self, label: &str, backend: &str) -> String {
        match self {
            Confirmation::Confirmed => {
                format!("confirmed: `{label}` failed on {backend} too")
            }
            Confirmation::NotConfirmed { failed } if failed.is_empty() => {
                format!("not confirmed: every invariant held on {backend}")
            }
            Confirmation::NotConfirmed { failed } => format!(
                "not confirmed: `{label}` held on {backend} (failed there instead: {})",
                failed
                    .iter()
                    .map(|f| format!("`{f}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// A finding's file with `line` added to its header, after its `# Replay:` line.
pub fn with_header_line(text: &str, line: &str) -> String {
    let mut out = String::with_capacity(text.len() + line.len() + 3);
    let mut added = false;
    for l in text.split_inclusive('\n') {
        out.push_str(l);
        if !added && l.starts_with("# Replay: ") {
            out.push_str(&format!("# {line}\n"));
            added = true;
        }
    }
    if !added {
        out = format!("# {line}\n{text}");
    }
    out
}

#[cfg(test)]
mod confirm_tests {
    use super::*;

    /// A finding is confirmed only when its own invariant fails on the real backend; a replay
    /// where it held is not, whatever else failed, and says what did.
    #[test]
    fn a_finding_is_confirmed_only_by_its_own_invariant_failing() {
        let label = "leader-reacquired default/agent-lock";
        let c = Confirmation::of(
            label,
            [("single-leader default/agent-lock", true), (label, false)],
        );
        assert_eq!(c, Confirmation::Confirmed);
        assert_eq!(
            c.describe(label, "the local control plane"),
            "confirmed: `leader-reacquired default/agent-lock` failed on the local control plane too"
        );
        let c = Confirmation::of(label, [(label, true), ("schedulable", false)]);
        assert_eq!(
            c.describe(label, "local"),
            "not confirmed: `leader-reacquired default/agent-lock` held on local (failed there instead: `schedulable`)"
        );
        let c = Confirmation::of(label, [(label, true)]);
        assert_eq!(
            c.describe(label, "local"),
            "not confirmed: every invariant held on local"
        );
    }

    #[test]
    fn the_label_goes_after_the_replay_line() {
        let text = "# Found by x\n# Replay: kubechaos scenario f.yaml\nname: f\n";
        assert_eq!(
            with_header_line(text, "`--confirm local`: confirmed."),
            "# Found by x\n# Replay: kubechaos scenario f.yaml\n# `--confirm local`: confirmed.\nname: f\n"
        );
        assert_eq!(with_header_line("name: f\n", "x"), "# x\nname: f\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOPO: &str = "# yaml-language-server: $schema=../docs/scenario.schema.json\nname: t\ndescription: |\n  a topology\ncluster:\n  nodes: 1\n  components:\n    kube-scheduler: {replicas: 2}\n  agents:\n    - {name: agent, replicas: 1, lease: default/agent-lock, mode: give-up}\nfaults:\n  - {at: 5s, api-server: restart}\nexpect:\n  - leader-reacquired: {lease: default/agent-lock, within: 60s}\nduration: 3m\n";

    fn topo() -> Topology {
        let s = scenario::parse(Path::new("t.yaml"), TOPO.as_bytes()).expect("valid");
        Topology::new(&s, TOPO).expect("topology")
    }

    #[test]
    fn a_case_is_a_function_of_seed_and_index_and_renders_a_valid_scenario() {
        let t = topo();
        let opts = ExploreOptions::default();
        assert_eq!(
            case_tree(&t, &opts, 7).current(),
            case_tree(&t, &opts, 7).current()
        );
        assert_ne!(
            case_tree(&t, &opts, 7).current(),
            case_tree(&t, &opts, 8).current()
        );
        for k in 0..50 {
            let schedule = case_tree(&t, &opts, k).current();
            let (name, text) = t.render(&schedule, "Found by a test", "sim: {seed: 1}");
            assert!(text.starts_with("# Found by a test\n"), "{text}");
            assert!(
                !text.contains("api-server: restart}\nexpect"),
                "the topology's faults are dropped"
            );
            let s = scenario::parse(Path::new(&format!("{name}.yaml")), text.as_bytes())
                .unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(s.faults.len(), schedule.len());
            assert_eq!(s.cluster.agents.len(), 1);
            // What is played (the model) is what the file says.
            let played = t.scenario(&schedule);
            assert_eq!(played.name, name);
            let steps = |s: &Scenario| -> Vec<_> {
                s.faults
                    .iter()
                    .map(|f| (f.at, f.for_, f.action.clone()))
                    .collect()
            };
            assert_eq!(steps(&played), steps(&s), "{text}");
            assert_eq!(played.run_duration(), s.run_duration());
        }
    }

    /// A topology with several API servers and etcd members has them as targets of their own:
    /// each killed or removed alone (etcd's leader too), and cut off from the other side; every
    /// such schedule is a valid scenario.
    #[test]
    fn an_ha_topology_generates_faults_on_single_api_servers_and_members() {
        let text = "name: ha\ncluster:\n  nodes: 1\n  api-servers: 3\n  etcd: {members: 3}\n  components: {kube-scheduler: {replicas: 2}}\nexpect:\n  - single-leader: {lease: kube-system/kube-scheduler}\n";
        let s = scenario::parse(Path::new("ha.yaml"), text.as_bytes()).expect("valid");
        let t = Topology::new(&s, text).expect("topology");
        let opts = ExploreOptions::default();
        let mut seen = std::collections::BTreeSet::new();
        for k in 0..400 {
            let schedule = case_tree(&t, &opts, k).current();
            let (name, file) = t.render(&schedule, "Found by a test", "sim: {seed: 1}");
            scenario::parse(Path::new(&format!("{name}.yaml")), file.as_bytes())
                .unwrap_or_else(|e| panic!("{e}\n{file}"));
            for f in &schedule {
                let text = f.action.to_string();
                for kind in [
                    "kill: api-server/",
                    "remove: etcd/leader",
                    "partition: [api-server/",
                    "partition: [api-server, etcd/",
                ] {
                    if text.starts_with(kind) {
                        seen.insert(kind);
                    }
                }
            }
        }
        assert_eq!(seen.len(), 4, "{seen:?}");
    }

    #[test]
    fn shards_split_the_cases_and_bad_shards_are_refused() {
        assert_eq!(parse_shard("1/4"), Ok((1, 4)));
        assert!(parse_shard("4/4").is_err());
        assert!(parse_shard("x").is_err());
        assert!(parse_shard("0/0").is_err());
    }

    #[test]
    fn invariants_anchored_on_step_ids_are_refused() {
        let text = "name: t\ncluster: {nodes: 1, components: {kube-scheduler: {replicas: 1}}}\nfaults:\n  - {at: 5s, id: x, api-server: restart}\nexpect:\n  - schedulable: {within: 30s, after: x}\n";
        let s = scenario::parse(Path::new("t.yaml"), text.as_bytes()).expect("valid");
        let err = Topology::new(&s, text).unwrap_err();
        assert!(err[0].1.contains("anchored with `after:`"), "{}", err[0].1);
    }
}

//! The command line: argument parsing and dispatch. Everything it calls lives in the library.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::exit;
use kubechaos_core::report::{junit, summary, terminal, Entry};
use kubechaos_core::scenario::{self, Diagnostic, LoadError};
use kubechaos_engine::backend::kube::Provider as EngineProvider;
use kubechaos_engine::backend::BackendError;
use kubechaos_engine::run::{self, Playable, DEFAULT_SEED};

const EXAMPLES: &str = "\
Examples:
  kubechaos scenario api-restart                 play scenarios/api-restart.yaml on the sim
  kubechaos scenario api-restart --seed 7        the same with another seed (same seed, same run)
  kubechaos scenario ./my.yaml --events ev.jsonl --junit report.xml
  kubechaos scenario api-restart --report run.html   the run as one HTML page (timeline, verdicts)
  kubechaos report ev.jsonl -o run.html          the same page from an events file, later
  kubechaos scenario api-restart --backend local on a real control plane started on this machine
  kubechaos scenario my.yaml --backend kube --context kind-chaos [--dry-run]
                                                 on an existing cluster, behind a safety guard
  kubechaos cluster up                           a real control plane for kubectl, until Ctrl-C
  kubechaos list                                 the shipped scenarios and what each proves
  kubechaos suite scenarios/ --junit junit.xml   every scenario, one report (for CI)
  kubechaos validate scenarios/                  check files without running them
  kubechaos schema > scenario.schema.json        for editors (yaml-language-server)

Exit codes: 0 every invariant held, 1 an invariant was violated, 2 bad input
(file, flag, target, a fault the backend cannot do), 3 the environment failed.";

/// kubechaos: prove that a Kubernetes control plane heals.
///
/// Plays scenario files (partitions, API-server restarts, the loss of every scheduler) against a
/// deterministic simulated cluster or a real control plane started on this machine, and judges
/// whether leadership is re-acquired and the cluster becomes schedulable again.
#[derive(Debug, Parser)]
#[command(name = "kubechaos", version, after_help = EXAMPLES)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Play a scenario and judge its invariants.
    #[command(
        after_help = "Examples:\n  kubechaos scenario api-restart\n  kubechaos scenario scenarios/delete-all-schedulers.yaml --seed 42 -v\n  kubechaos scenario delete-both --backend local\n  kubechaos scenario api-restart --events run.jsonl --junit junit.xml --report run.html\n  kubechaos scenario agent-api-restart --backend local --keep\n  kubechaos scenario scenarios-kube/api-server-restart.yaml --backend kube --context kind-chaos\n  kubechaos scenario scenarios-kind/remove-the-scheduler.yaml --backend kube --context kind-chaos --dry-run\n\nOn --backend kube the provider (kind, k3s, generic) comes from the context name or the nodes,\nor from --provider; a step it cannot do is exit 2 before anything runs, with what it can do.\nOn --backend local the run takes the scenario's time in real time plus about 15s; Ctrl-C\nstops every process it started and removes its run directory (exit 3).\nWhile a real-time run plays, a live view on a terminal shows the current step, the time to the\nnext, each lease's holder (or how long ago it expired) and a countdown on each invariant; when\nstandard error is not a terminal, or CI is set, that is a plain status line every 30s."
    )]
    Scenario(ScenarioArgs),
    /// Play every scenario of a directory (or the files given), one after the other, and write
    /// one report for all of them.
    #[command(
        after_help = "Examples:\n  kubechaos suite                                   every file in ./scenarios, on the sim\n  kubechaos suite scenarios/ --junit junit.xml --json summary.json --events-dir events/\n  kubechaos suite scenarios/ --report-dir reports/                  a page per scenario\n  kubechaos suite scenarios/api-restart.yaml scenarios/delete-both.yaml --backend local\n\nEvery file is validated (and checked against the backend) before anything runs: a problem in\nany of them is exit 2 and nothing runs. Then each scenario plays in turn; one that cannot run\n(its cluster did not start) is reported and the suite goes on.\nExit codes: 0 every invariant of every scenario held, 1 some invariant was violated, 2 bad\ninput, 3 some scenario could not run (or the suite was interrupted)."
    )]
    Suite(SuiteArgs),
    /// Generate fault schedules against a topology on the sim, run them, and shrink each
    /// violation to the smallest schedule that still breaks the invariant, written out as a
    /// scenario file that replays it.
    #[command(
        after_help = "Examples:\n  kubechaos explore agent-give-up                    topologies/agent-give-up.yaml, 200 schedules\n  kubechaos explore control-plane --runs 2000 --max-faults 5 --seed 7\n  kubechaos explore my-topology.yaml --shard 2/8 --out found/   one machine of eight\n\nA topology is a scenario file: its cluster and invariants are kept, its faults generated (API-server\nstops, crashes and restarts, kills, removals, partitions with the API server, one way or both,\nleader-targeted or by replica). Case K is the same wherever it runs (its schedule comes from\n--seed and K alone), so N shards of --runs R run exactly the R cases of one exploration.\nEach violated invariant's first case is shrunk (fewer faults, shorter, earlier, simpler) and\nwritten to OUT/TOPOLOGY-HASH.yaml with the command that replays it.\nExit codes: 0 nothing violated, 1 violations found (files written), 2 bad input, 3 the\nenvironment failed."
    )]
    Explore(ExploreArgs),
    /// Render an events file (written by --events or --events-dir) as the HTML report, the same
    /// page that --report writes during the run.
    #[command(
        after_help = "Examples:\n  kubechaos report run.jsonl                     writes run.html\n  kubechaos report events/api-restart.jsonl -o api-restart.html\n\nThe page needs no network: open it in any browser. Hover over an item for its details, click\nto keep them (the address then names the item: #item=ID).\nExit codes: 0 written, 2 the events file cannot be read or is not one, 3 the report cannot be\nwritten."
    )]
    Report(ReportArgs),
    /// List the scenarios in ./scenarios (and the shipped ones).
    List,
    /// Check scenario files (or directories of them) without running anything.
    #[command(
        after_help = "Every problem is reported as FILE:LINE:COL: what is wrong; what was expected.\nExit code 2 when any file has a problem."
    )]
    Validate {
        /// Files or directories.
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// Also check that this backend can run them.
        #[arg(long, value_enum, default_value = "sim")]
        backend: Backend,
        /// With `--backend kube`: also check that this provider can do their faults.
        #[arg(long, value_enum, default_value = "auto")]
        provider: Provider,
    },
    /// Print the JSON Schema of scenario files.
    Schema,
    /// The local control plane: build its upstream binaries, start, inspect and stop it.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Run the reference agent: a leader-elected program whose leader-only modules start when
    /// it leads and stop when it stops leading (what the local backend runs for each replica).
    #[command(
        after_help = "Examples:\n  kubechaos agent --lease default/agent-lock\n  kubechaos agent --lease default/agent-lock --mode give-up --kubeconfig kind.yaml --context kind-chaos\n\nReports leadership as JSON lines on stdout ({\"event\":\"leading-started\",...}); logs go to stderr\n(RUST_LOG=info shows the elector). Runs until killed."
    )]
    Agent(AgentArgs),
    /// Disaster recovery for a control plane that lost every scheduler or controller-manager:
    /// run a workload's pod without either, or bind pending pods by hand. Works on any cluster.
    #[command(subcommand)]
    Recover(RecoverCommand),
}

/// `--backend`: which world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Backend {
    /// A deterministic simulated cluster.
    Sim,
    /// A real control plane started on this machine from upstream binaries.
    Local,
    /// An existing cluster from a kubeconfig context.
    Kube,
}

impl Backend {
    /// As written on the command line.
    fn name(self) -> &'static str {
        match self {
            Backend::Sim => "sim",
            Backend::Local => "local",
            Backend::Kube => "kube",
        }
    }
}

/// The backend `--backend` names, with its options: the one place the command line's choice
/// becomes a world.
fn backend_of(
    backend: Backend,
    seed: u64,
    tick: Duration,
    keep: bool,
    kube: kubechaos_engine::backend::kube::KubeTarget,
) -> Box<dyn Playable> {
    use kubechaos_engine::backend::sim::{Sim, SimOptions};
    use kubechaos_engine::backend::{kube::Kube, local::run::Local, local::run::LocalOptions};
    match backend {
        Backend::Sim => Box::new(Sim::new(SimOptions { seed, tick })),
        Backend::Local => Box::new(Local::new(LocalOptions { keep })),
        Backend::Kube => Box::new(Kube::new(kube)),
    }
}

/// `--provider`: the kube backend's providers, as the command line names them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
enum Provider {
    /// From the context name, else from the cluster's nodes.
    #[default]
    Auto,
    /// The API only.
    Generic,
    /// kind: the docker CLI against the node containers.
    Kind,
    /// k3s in containers (k3d): the docker CLI against the server and agent containers.
    K3s,
    /// k3s in a container that kubechaos starts through testcontainers and removes at the end
    /// (the `testcontainers` feature; needs a Docker engine); then as `k3s`.
    K3sContainer,
}

impl Provider {
    /// As `--provider` names it.
    fn name(self) -> &'static str {
        EngineProvider::from(self).name()
    }
}

impl From<Provider> for EngineProvider {
    fn from(p: Provider) -> EngineProvider {
        match p {
            Provider::Auto => EngineProvider::Auto,
            Provider::Generic => EngineProvider::Generic,
            Provider::Kind => EngineProvider::Kind,
            Provider::K3s => EngineProvider::K3s,
            Provider::K3sContainer => EngineProvider::K3sContainer,
        }
    }
}

/// Where the cluster is, as kubectl takes it.
#[derive(Debug, clap::Args)]
struct KubeArgs {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long)]
    context: Option<String>,
    /// Namespace.
    #[arg(short = 'n', long, default_value = "default")]
    namespace: String,
}

/// Which existing cluster `--backend kube` touches, and the safety guard's allow-list.
#[derive(Debug, Clone, clap::Args)]
struct TargetArgs {
    /// kube backend: the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// kube backend: the kubeconfig context (default: its current context).
    #[arg(long)]
    context: Option<String>,
    /// kube backend: allow this context although it does not look disposable (the guard allows
    /// only `kind-*`, `k3d-*` and kubechaos's own `kubechaos-local`). Repeatable.
    #[arg(long, value_name = "NAME")]
    allow_context: Vec<String>,
    /// kube backend: kubechaos's configuration file, whose `allow-contexts` the guard allows too
    /// (default: $KUBECHAOS_CONFIG, else ~/.config/kubechaos/config.yaml if it exists).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// kube backend: how kubechaos reaches the cluster's machines for faults the API cannot do
    /// (default: from the context name, `kind-*` or `k3d-*`, else from the nodes).
    #[arg(long, value_enum, default_value = "auto")]
    provider: Provider,
}

impl TargetArgs {
    /// The target, once the guard let it through (exit 2 otherwise). None unless `kube`.
    fn guarded(
        &self,
        backend: Backend,
    ) -> Result<kubechaos_engine::backend::kube::KubeTarget, i32> {
        if backend != Backend::Kube {
            return Ok(Default::default());
        }
        if self.provider == Provider::K3sContainer {
            // Its own cluster, made for the run: no context to guard.
            if !cfg!(feature = "testcontainers") {
                eprintln!(
                    "kubechaos: {}",
                    kubechaos_engine::backend::kube::NO_TESTCONTAINERS
                );
                return Err(exit::BAD_INPUT);
            }
            return Ok(kubechaos_engine::backend::kube::KubeTarget {
                provider: self.provider.into(),
                ..Default::default()
            });
        }
        let config = kubechaos_engine::config::load(self.config.as_deref()).map_err(|e| {
            eprintln!("kubechaos: {e}");
            exit::BAD_INPUT
        })?;
        let mut allow = self.allow_context.clone();
        allow.extend(config.allow_contexts);
        let context = kubechaos_engine::backend::kube::resolve_context(
            self.kubeconfig.as_deref(),
            self.context.as_deref(),
        )
        .and_then(|c| kubechaos_engine::backend::kube::guard(&c, &allow).map(|()| c))
        .map_err(|e| {
            eprintln!("kubechaos: {e}");
            exit::BAD_INPUT
        })?;
        let provider = match self.provider {
            Provider::Auto => EngineProvider::from_context(&context).unwrap_or_default(),
            p => p.into(),
        };
        Ok(kubechaos_engine::backend::kube::KubeTarget {
            kubeconfig: self.kubeconfig.clone(),
            context: Some(context),
            allow,
            provider,
        })
    }
}

#[derive(Debug, Subcommand)]
enum RecoverCommand {
    /// Create a pod from a workload's pod template, pre-bound to a node with spec.nodeName, so
    /// that neither a scheduler nor a controller-manager is needed to run it.
    #[command(
        after_help = "Examples:\n  kubechaos recover pod-from deployment/kube-scheduler -n kube-system --node cp-1\n  kubechaos recover pod-from deployment/kube-controller-manager -n kube-system --node cp-1 --cleanup\n  kubechaos recover pod-from ds/kube-proxy -n kube-system --node cp-1 --dry-run -o yaml\n\nKinds: deployment, daemonset, statefulset, replicaset, podtemplate. The pod is named\nNAME-recovery-XXXXX and labelled kubechaos.io/recovery-for=KIND.NAME; it keeps the template's labels\nexcept those the workload's selector uses, so the workload's controller does not adopt it.\nWith --cleanup it waits until the workload's own pods are Ready again (as many as it wants,\ncounted from its pods: its status is stale while no controller-manager runs) and deletes the\npod (exit 1 if that does not happen within --timeout; the pod is then left running).\nExit codes: 0 done, 1 not available in time, 2 bad input (no such workload, node missing or\nnot Ready), 3 the cluster could not be reached."
    )]
    PodFrom(PodFromArgs),
    /// Bind pending pods to a node with a Binding, as a scheduler would.
    #[command(
        after_help = "Examples:\n  kubechaos recover bind kube-scheduler-6d4f9c-abcde -n kube-system --node cp-1\n  kubechaos recover bind --all-pending -n kube-system -l component=kube-scheduler --node cp-1"
    )]
    Bind(BindArgs),
}

#[derive(Debug, clap::Args)]
struct PodFromArgs {
    /// The workload, KIND/NAME (as kubectl names it: deployment/x, ds/x, sts/x, rs/x, podtemplate/x).
    #[arg(value_name = "KIND/NAME")]
    workload: String,
    /// The node to run the pod on: it must exist and be Ready.
    #[arg(long)]
    node: String,
    /// Print the pod instead of creating it.
    #[arg(long)]
    dry_run: bool,
    /// Output format of --dry-run.
    #[arg(short = 'o', long, default_value = "yaml", value_parser = ["yaml", "json"])]
    output: String,
    /// Wait until the workload's own pods are Ready again, then delete the recovery pod.
    #[arg(long)]
    cleanup: bool,
    /// How long --cleanup waits.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    timeout: Duration,
    #[command(flatten)]
    kube: KubeArgs,
}

#[derive(Debug, clap::Args)]
struct BindArgs {
    /// The pending pod's name.
    #[arg(
        value_name = "POD",
        required_unless_present = "all_pending",
        conflicts_with = "all_pending"
    )]
    pod: Option<String>,
    /// The node to bind to: it must exist and be Ready.
    #[arg(long)]
    node: String,
    /// Bind every pending pod in the namespace (that matches -l).
    #[arg(long)]
    all_pending: bool,
    /// Label selector for --all-pending, as kubectl -l takes it.
    #[arg(short = 'l', long, default_value = "", requires = "all_pending")]
    selector: String,
    #[command(flatten)]
    kube: KubeArgs,
}

#[derive(Debug, clap::Args)]
struct AgentArgs {
    /// The Lease to compete for, NAMESPACE/NAME.
    #[arg(long, value_name = "NS/NAME")]
    lease: String,
    /// What to do on losing the lease: correct (be a candidate again), give-up (the elector
    /// returns and nothing restarts it), stuck-on-stop (stopping a module blocks forever).
    #[arg(long, default_value = "correct", value_parser = ["correct", "give-up", "stuck-on-stop"])]
    mode: String,
    /// Identity written into the Lease (default: HOSTNAME_RANDOM, as client-go programs do).
    #[arg(long)]
    identity: Option<String>,
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long)]
    context: Option<String>,
}

#[derive(Debug, Subcommand)]
enum ClusterCommand {
    /// Build etcd, kube-apiserver, kube-scheduler and kube-controller-manager at the pinned
    /// versions (fixtures/control-plane) into ~/.cache/kubechaos (or $KUBECHAOS_CACHE), once.
    #[command(
        after_help = "Needs Go 1.26+ and the Go module proxy. Takes about 10 minutes on 2 cores the first time;\nlater calls find the binaries and return at once. Prints where they are."
    )]
    Build,
    /// Start a local control plane and keep it running until Ctrl-C (or for --for).
    #[command(
        after_help = "Examples:\n  kubechaos cluster up                       3 nodes, 2 schedulers, 2 controller-managers\n  kubechaos cluster up --nodes 1 --for 30s   up for 30 seconds, then cleaned away\n\nPrints the KUBECONFIG to use with kubectl. Everything it started is stopped, and its run\ndirectory removed (unless --keep), when it ends."
    )]
    Up(UpArgs),
    /// Show the local control planes running on this machine (from `cluster up` or a scenario
    /// run): their kubeconfig, API readiness, lease holders and nodes.
    Status,
    /// Stop local control planes: every running `cluster up`, or the one in DIR (a scenario
    /// run's too). Also removes run directories left by a kubechaos that was killed outright
    /// (unless they were kept).
    #[command(
        after_help = "Examples:\n  kubechaos cluster down\n  kubechaos cluster down /tmp/kubechaos-Ab12Cd"
    )]
    Down {
        /// A run directory, as `cluster up` and `cluster status` print it.
        #[arg(value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

#[derive(Debug, clap::Args)]
struct UpArgs {
    /// Fake nodes.
    #[arg(long, default_value_t = 3)]
    nodes: u32,
    /// kube-scheduler replicas.
    #[arg(long, default_value_t = 2)]
    schedulers: u32,
    /// kube-controller-manager replicas.
    #[arg(long, default_value_t = 2)]
    controller_managers: u32,
    /// Run the scheduler and controller-manager as Deployments in kube-system, their pods run by
    /// the fake nodes (bootstrapped through temporary pods, then handed over): a cluster to
    /// break and recover by hand with `kubectl delete pods` and `kubechaos recover`.
    #[arg(long)]
    self_hosted: bool,
    /// Stop after this long (e.g. 30s) instead of waiting for Ctrl-C.
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration)]
    for_: Option<Duration>,
    /// Keep the run directory (certificates, kubeconfigs, logs, etcd data) after stopping.
    #[arg(long)]
    keep: bool,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    scenario::duration::parse(s)
}

#[derive(Debug, clap::Args)]
struct ScenarioArgs {
    /// A scenario name (found as scenarios/NAME.yaml) or a path to a file.
    #[arg(value_name = "NAME|PATH")]
    scenario: String,
    /// Where to run it.
    #[arg(long, value_enum, default_value = "sim")]
    backend: Backend,
    /// Seed of the simulation: the same seed gives the same run, event for event.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
    /// Write the observed timeline as JSON lines.
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
    /// Write a JUnit XML report (one testcase per invariant).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Write a JSON summary (each invariant's verdict and message, the exit code).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write the HTML report: one self-contained page with the run's timeline (faults, lease
    /// holders, processes, nodes, probe pods, each invariant's window and verdict).
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Show every observed event, not only the notable ones.
    #[arg(short, long)]
    verbose: bool,
    /// Keep the run directory of a local run (certificates, kubeconfigs, logs, etcd data).
    #[arg(long)]
    keep: bool,
    /// Virtual milliseconds per simulation step (sim).
    #[arg(long, default_value_t = kubechaos_engine::backend::sim::DEFAULT_TICK_MS, value_name = "MS", hide_short_help = true, value_parser = clap::value_parser!(u64).range(1..=1000))]
    tick_ms: u64,
    /// Print the plan (each step, how it is carried out, what undoes it) and touch nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    target: TargetArgs,
}

#[derive(Debug, clap::Args)]
struct ExploreArgs {
    /// The topology: a scenario file, or a name in ./topologies (and the shipped ones).
    #[arg(value_name = "TOPOLOGY", default_value = "control-plane")]
    topology: String,
    /// Schedules in the whole exploration (all shards together).
    #[arg(long, default_value_t = 200)]
    runs: usize,
    /// Seed of the schedules and of every simulated run.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
    /// At most this many faults in one schedule.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=20))]
    max_faults: u64,
    /// Run only this shard of the cases: I/N takes case K when K mod N = I.
    #[arg(long, value_name = "I/N", value_parser = kubechaos_engine::explore::parse_shard)]
    shard: Option<(usize, usize)>,
    /// Where the shrunk scenario files go.
    #[arg(long, value_name = "DIR", default_value = "explore-found")]
    out: PathBuf,
    /// Simulations run at once (default: the number of cores).
    #[arg(short = 'j', long)]
    jobs: Option<usize>,
    /// At most this many runs to shrink one violation.
    #[arg(long, default_value_t = 300)]
    max_shrink_runs: usize,
    /// Virtual milliseconds per simulation step (the written files replay with it).
    #[arg(long, default_value_t = kubechaos_engine::explore::TICK_MS, value_name = "MS", hide_short_help = true, value_parser = clap::value_parser!(u64).range(1..=1000))]
    tick_ms: u64,
}

#[derive(Debug, clap::Args)]
struct ReportArgs {
    /// The events file (JSON lines).
    #[arg(value_name = "EVENTS.jsonl")]
    events: PathBuf,
    /// Where to write the page (default: the events file with `.html` in place of its extension).
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct SuiteArgs {
    /// Scenario files or directories of them (default: ./scenarios).
    #[arg(value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Where to run them.
    #[arg(long, value_enum, default_value = "sim")]
    backend: Backend,
    /// Seed of every simulated run.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
    /// Write a JUnit XML report: one testsuite per scenario, one testcase per invariant.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Write a JSON summary of every scenario and invariant.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write each scenario's observed timeline to DIR/NAME.jsonl (the reports name them).
    #[arg(long, value_name = "DIR")]
    events_dir: Option<PathBuf>,
    /// Write each scenario's HTML report to DIR/NAME.html (the reports name them).
    #[arg(long, value_name = "DIR")]
    report_dir: Option<PathBuf>,
    #[command(flatten)]
    target: TargetArgs,
}

/// Parse arguments, run, and return the exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                exit::BAD_INPUT
            } else {
                exit::HELD
            };
        }
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,kube_client=off".into()),
        )
        .with_writer(std::io::stderr)
        .try_init();
    match cli.command {
        Command::Scenario(args) => scenario_cmd(&args),
        Command::Suite(args) => suite_cmd(&args),
        Command::Explore(args) => explore_cmd(&args),
        Command::Report(args) => report_cmd(&args),
        Command::List => list_cmd(),
        Command::Validate {
            paths,
            backend,
            provider,
        } => validate_cmd(&paths, backend, provider),
        Command::Cluster(ClusterCommand::Build) => cluster_build(),
        Command::Cluster(ClusterCommand::Up(args)) => cluster_up(&args),
        Command::Cluster(ClusterCommand::Status) => cluster_status(),
        Command::Cluster(ClusterCommand::Down { dir }) => cluster_down(dir.as_deref()),
        Command::Agent(args) => agent_cmd(&args),
        Command::Recover(RecoverCommand::PodFrom(args)) => recover_pod_from(&args),
        Command::Recover(RecoverCommand::Bind(args)) => recover_bind(&args),
        Command::Schema => {
            print!("{}", scenario::json_schema());
            exit::HELD
        }
    }
}

fn print_load_error(e: &LoadError) -> i32 {
    eprintln!("{e}");
    if let LoadError::Invalid(d) = e {
        if d.len() > 1 {
            eprintln!("{} problems", d.len());
        }
    }
    exit::BAD_INPUT
}

fn print_unsupported(
    s: &scenario::Scenario,
    backend: &str,
    problems: Vec<(scenario::Pos, String)>,
) -> i32 {
    print_problems(s, problems);
    eprintln!("kubechaos: the {backend} backend cannot run this scenario");
    exit::BAD_INPUT
}

/// Each problem as FILE:LINE:COL: message.
fn print_problems(s: &scenario::Scenario, problems: Vec<(scenario::Pos, String)>) {
    for (pos, message) in problems {
        eprintln!(
            "{}",
            Diagnostic {
                path: s.source.path.clone(),
                pos,
                message
            }
        );
    }
}

fn replay_command(args: &ScenarioArgs) -> String {
    let prefix = if std::env::var_os("CARGO").is_some() {
        "cargo run --"
    } else {
        "kubechaos"
    };
    let mut cmd = format!("{prefix} scenario {}", args.scenario);
    if args.backend == Backend::Sim {
        cmd.push_str(&format!(" --seed {}", args.seed));
    } else {
        cmd.push_str(&format!(" --backend {}", args.backend.name()));
    }
    if args.tick_ms != kubechaos_engine::backend::sim::DEFAULT_TICK_MS {
        cmd.push_str(&format!(" --tick-ms {}", args.tick_ms));
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

fn write_file(path: &Path, content: &[u8], what: &str) -> Result<(), i32> {
    std::fs::write(path, content).map_err(|e| {
        eprintln!(
            "kubechaos: cannot write the {what} to {}: {e}",
            path.display()
        );
        exit::ENVIRONMENT
    })
}

/// Whether `path` can be written, checked by opening it (a file that did not exist is removed
/// again).
fn check_writable(path: &Path, what: &str) -> Result<(), i32> {
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
        Err(e) => {
            eprintln!(
                "kubechaos: cannot write the {what} to {}: {e}",
                path.display()
            );
            Err(exit::ENVIRONMENT)
        }
    }
}

fn scenario_cmd(args: &ScenarioArgs) -> i32 {
    let loaded = scenario::resolve(&args.scenario).and_then(|p| scenario::load(&p));
    let s = match loaded {
        Ok(s) => s,
        Err(e) => return print_load_error(&e),
    };
    // Find out now, not after a run of several real minutes, that a report cannot be written.
    let outputs: Vec<&Path> = [&args.events, &args.junit, &args.json, &args.report]
        .into_iter()
        .flatten()
        .map(PathBuf::as_path)
        .collect();
    if let Some(twice) = outputs
        .iter()
        .enumerate()
        .find_map(|(i, p)| outputs[..i].contains(p).then_some(p))
    {
        eprintln!(
            "kubechaos scenario: {} is given for two reports; expected a file each for --events, --junit, --json and --report",
            twice.display()
        );
        return exit::BAD_INPUT;
    }
    for (path, what) in [
        (&args.events, "events"),
        (&args.junit, "JUnit report"),
        (&args.json, "JSON summary"),
        (&args.report, "HTML report"),
    ] {
        if let Some(path) = path {
            if let Err(code) = check_writable(path, what) {
                return code;
            }
        }
    }
    let kube = match args.target.guarded(args.backend) {
        Ok(kube) => kube,
        Err(code) => return code,
    };
    let unsupported = backend_of(
        args.backend,
        args.seed,
        Duration::from_millis(args.tick_ms),
        args.keep,
        kube.clone(),
    )
    .check(&s);
    if !unsupported.is_empty() {
        return print_unsupported(&s, args.backend.name(), unsupported);
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
            kubechaos_engine::backend::kube::dry_run(&s, &run::Plan::new(&s), kube.provider)
        );
        return exit::HELD;
    }
    println!(
        "kubechaos: scenario {} ({}) on {}{}",
        s.name,
        s.source.path.display(),
        args.backend.name(),
        if args.backend == Backend::Sim {
            format!(", seed {}", args.seed)
        } else {
            String::new()
        }
    );
    for line in s.description.lines().filter(|l| !l.trim().is_empty()) {
        println!("  {}", line.trim_end());
    }
    println!("  cluster: {}", terminal::cluster_line(&s));
    println!(
        "  duration: {}\n",
        scenario::duration::human(s.run_duration())
    );
    let mut live = kubechaos_core::report::live::Terminal::stderr("  ");
    let mut backend = backend_of(
        args.backend,
        args.seed,
        Duration::from_millis(args.tick_ms),
        args.keep,
        kube,
    );
    let outcome = match run::run(&s, backend.as_mut(), &mut live) {
        Ok(o) => o,
        Err(BackendError::Unsupported { backend, problems }) => {
            return print_unsupported(&s, backend, problems)
        }
        Err(BackendError::Environment(e)) => {
            eprintln!("kubechaos: {e}");
            return exit::ENVIRONMENT;
        }
        Err(BackendError::Interrupted { message, events }) => {
            eprintln!("kubechaos: {message}");
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
            return exit::ENVIRONMENT;
        }
    };
    print!("{}", terminal::timeline(&outcome, args.verbose));
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
    if let Err(code) = write_run_files(
        &outcome.events,
        args.events.as_deref(),
        args.report.as_deref(),
    ) {
        return code;
    }
    for (path, what) in [(&args.events, "events"), (&args.report, "report")] {
        if let Some(path) = path {
            println!("{what}: {}", path.display());
        }
    }
    let code = if outcome.held() {
        exit::HELD
    } else {
        exit::VIOLATED
    };
    let entries = [Entry {
        scenario: &s,
        outcome: Ok(&outcome),
        events_path: args.events.as_deref(),
        report_path: args.report.as_deref(),
    }];
    if let Err(code) = write_reports(
        &entries,
        args.backend,
        args.seed,
        code,
        args.junit.as_deref(),
        args.json.as_deref(),
    ) {
        return code;
    }
    if code == exit::VIOLATED {
        println!("replay: {}", replay_command(args));
    }
    code
}

/// Write a run's events file and its HTML report, where asked.
fn write_run_files(
    timeline: &[kubechaos_core::events::Event],
    events: Option<&Path>,
    report: Option<&Path>,
) -> Result<(), i32> {
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

fn report_cmd(args: &ReportArgs) -> i32 {
    let path = &args.events;
    let text = match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(_) => {
                eprintln!(
                    "kubechaos report: {}: not text; expected JSON lines as written by `kubechaos scenario --events FILE`",
                    path.display()
                );
                return exit::BAD_INPUT;
            }
        },
        Err(e) => {
            eprintln!(
                "kubechaos report: cannot read {}: {e}; expected an events file written by `kubechaos scenario --events FILE`",
                path.display()
            );
            return exit::BAD_INPUT;
        }
    };
    let events = match kubechaos_core::events::read_jsonl(&text) {
        Ok(ev) => ev,
        Err(e) => {
            eprintln!(
                "{}:{}:{}: not a kubechaos event: {}; expected one JSON object per line as written by `kubechaos scenario --events FILE`",
                path.display(),
                e.line,
                e.column,
                e.message
            );
            return exit::BAD_INPUT;
        }
    };
    let page = match kubechaos_core::report::html::render(&events) {
        Ok(p) => p,
        Err(kubechaos_core::report::html::ModelError::NoRunStarted) => {
            eprintln!(
                "{}:1:1: no run-started event; expected an events file written by `kubechaos scenario --events FILE` (it starts with one)",
                path.display()
            );
            return exit::BAD_INPUT;
        }
    };
    let out = args
        .output
        .clone()
        .unwrap_or_else(|| path.with_extension("html"));
    if out == *path {
        eprintln!(
            "kubechaos report: the report would overwrite its events file {}; give another with -o FILE",
            path.display()
        );
        return exit::BAD_INPUT;
    }
    if let Err(code) = write_file(&out, page.as_bytes(), "HTML report") {
        return code;
    }
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
    exit::HELD
}

/// Write the JUnit report and the JSON summary, where asked.
fn write_reports(
    entries: &[Entry<'_>],
    backend: Backend,
    seed: u64,
    code: i32,
    junit_path: Option<&Path>,
    json_path: Option<&Path>,
) -> Result<(), i32> {
    if let Some(path) = junit_path {
        let xml = junit::render(entries, backend.name(), seed);
        write_file(path, xml.as_bytes(), "JUnit report")?;
        println!("junit: {}", path.display());
    }
    if let Some(path) = json_path {
        let json = summary::render(entries, backend.name(), seed, code);
        write_file(path, json.as_bytes(), "JSON summary")?;
        println!("json: {}", path.display());
    }
    Ok(())
}

/// A single-threaded Tokio runtime (children started from it get a parent-death signal tied to
/// this thread), or exit 3.
fn runtime() -> Result<tokio::runtime::Runtime, i32> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("kubechaos: cannot start the async runtime: {e}");
            exit::ENVIRONMENT
        })
}

fn cluster_build() -> i32 {
    use kubechaos_engine::backend::local::build;
    let fixtures = build::fixtures_dir();
    let result = build::Pins::read(&fixtures).and_then(|pins| {
        let dir = build::ensure(&pins, &fixtures, &mut |line| eprintln!("{line}"))?;
        Ok((pins, dir))
    });
    match result {
        Ok((pins, dir)) => {
            println!(
                "Kubernetes {} and etcd {} are in {}",
                pins.kubernetes,
                pins.etcd,
                dir.display()
            );
            for b in build::BINARIES {
                println!("  {}", dir.join(b).display());
            }
            exit::HELD
        }
        Err(e) => {
            eprintln!("kubechaos: {e}");
            exit::ENVIRONMENT
        }
    }
}

fn cluster_up(args: &UpArgs) -> i32 {
    use kubechaos_core::scenario::Component;
    use kubechaos_engine::backend::local::cluster::{LocalCluster, Quiet, Spec};
    // One thread: children get a parent-death signal tied to the thread that started them.
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let spec = Spec {
        nodes: args.nodes,
        components: [
            (Component::KubeScheduler, args.schedulers),
            (Component::KubeControllerManager, args.controller_managers),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect(),
        agents: Vec::new(),
        self_hosted: args.self_hosted,
        purpose: "cluster up".into(),
    };
    rt.block_on(async {
        let mut say = |line: &str| eprintln!("{line}");
        let cluster = tokio::select! {
            biased;
            _ = tokio::signal::ctrl_c() => {
                eprintln!("kubechaos: interrupted while starting; everything started was stopped");
                return exit::ENVIRONMENT;
            }
            c = LocalCluster::up(&spec, args.keep, std::sync::Arc::new(Quiet), &mut say) => c,
        };
        let cluster = match cluster {
            Ok(c) => c,
            Err(e) => {
                eprintln!("kubechaos: the local control plane did not start: {e}");
                return exit::ENVIRONMENT;
            }
        };
        println!("export KUBECONFIG={}", cluster.admin_kubeconfig.display());
        println!("# then, for example: kubectl get leases -A; kubectl get nodes");
        println!("# logs: {}/logs", cluster.dir.display());
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let stop = async {
            match args.for_ {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = tokio::signal::ctrl_c() => eprintln!("kubechaos: stopping (Ctrl-C)"),
            _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => eprintln!("kubechaos: stopping (SIGTERM)"),
            () = stop => eprintln!("kubechaos: stopping"),
        }
        match cluster.down().await {
            Some(dir) => eprintln!("kubechaos: stopped; kept {}", dir.display()),
            None => eprintln!("kubechaos: stopped; every process ended and the run directory was removed"),
        }
        exit::HELD
    })
}

fn explore_cmd(args: &ExploreArgs) -> i32 {
    use std::io::IsTerminal;
    let path = match scenario::resolve_in(&args.topology, "topologies") {
        Ok(p) => p,
        Err(e) => return print_load_error(&e),
    };
    let s = match scenario::load(&path) {
        Ok(s) => s,
        Err(e) => return print_load_error(&e),
    };
    let problems = Playable::check(&kubechaos_engine::backend::sim::Sim::default(), &s);
    if !problems.is_empty() {
        return print_unsupported(&s, "sim", problems);
    }
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let topo = match kubechaos_engine::explore::Topology::new(&s, &text) {
        Ok(t) => t,
        Err(problems) => {
            print_problems(&s, problems);
            eprintln!(
                "kubechaos explore: {} cannot be a topology for generated faults",
                path.display()
            );
            return exit::BAD_INPUT;
        }
    };
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
    let summary =
        match kubechaos_engine::explore::explore(&topo, &opts, &args.out, &command, &mut report) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("kubechaos explore: {e}");
                return exit::ENVIRONMENT;
            }
        };
    println!(
        "\n{} run(s) in {:.1}s ({:.1} runs/s): {} violated an invariant",
        summary.runs,
        summary.wall.as_secs_f64(),
        summary.runs as f64 / summary.wall.as_secs_f64().max(1e-3),
        summary.violations
    );
    if summary.found.is_empty() {
        println!("nothing found");
        return exit::HELD;
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
        let tick = if opts.tick_ms == kubechaos_engine::backend::sim::DEFAULT_TICK_MS {
            String::new()
        } else {
            format!(" --tick-ms {}", opts.tick_ms)
        };
        println!(
            "  replay: kubechaos scenario {} --seed {}{tick}",
            f.path.display(),
            opts.seed
        );
    }
    exit::VIOLATED
}

fn suite_cmd(args: &SuiteArgs) -> i32 {
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from("scenarios")]
    } else {
        args.paths.clone()
    };
    let mut files = Vec::new();
    for p in &paths {
        if p.is_dir() {
            files.extend(yaml_files(p));
        } else if p.exists() {
            files.push(p.clone());
        } else {
            eprintln!(
                "kubechaos suite: {} does not exist; expected scenario files or directories",
                p.display()
            );
            return exit::BAD_INPUT;
        }
    }
    if files.is_empty() {
        eprintln!(
            "kubechaos suite: no scenario files (*.yaml) in {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return exit::BAD_INPUT;
    }
    let kube = match args.target.guarded(args.backend) {
        Ok(k) => k,
        Err(code) => return code,
    };
    // Everything is checked before anything runs.
    let mut backend = backend_of(
        args.backend,
        args.seed,
        Duration::from_millis(kubechaos_engine::backend::sim::DEFAULT_TICK_MS),
        false,
        kube,
    );
    let mut scenarios = Vec::new();
    let mut bad = false;
    for f in &files {
        match scenario::load(f) {
            Ok(s) => {
                let problems = backend.check(&s);
                if !problems.is_empty() {
                    print_unsupported(&s, args.backend.name(), problems);
                    bad = true;
                }
                scenarios.push(s);
            }
            Err(e) => {
                print_load_error(&e);
                bad = true;
            }
        }
    }
    if bad {
        eprintln!("kubechaos suite: nothing was run; fix the files above (exit 2)");
        return exit::BAD_INPUT;
    }
    for (path, what) in [(&args.junit, "JUnit report"), (&args.json, "JSON summary")] {
        if let Some(path) = path {
            if let Err(code) = check_writable(path, what) {
                return code;
            }
        }
    }
    for dir in [&args.events_dir, &args.report_dir].into_iter().flatten() {
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!("kubechaos suite: cannot create {}: {e}", dir.display());
            return exit::ENVIRONMENT;
        }
    }
    println!(
        "kubechaos: suite of {} scenario(s) on {}{}",
        scenarios.len(),
        args.backend.name(),
        if args.backend == Backend::Sim {
            format!(", seed {}", args.seed)
        } else {
            String::new()
        }
    );
    let started = std::time::Instant::now();
    let mut results: Vec<Result<run::Outcome, String>> = Vec::new();
    let mut events_paths: Vec<Option<PathBuf>> = Vec::new();
    let mut report_paths: Vec<Option<PathBuf>> = Vec::new();
    let mut interrupted = false;
    let mut live = kubechaos_core::report::live::Terminal::stderr("    ");
    for s in &scenarios {
        let result = run::run(s, backend.as_mut(), &mut live);
        let in_dir = |dir: &Option<PathBuf>, ext: &str| {
            dir.as_ref()
                .filter(|_| result.is_ok())
                .map(|d| d.join(format!("{}.{ext}", s.name)))
        };
        let (events_path, report_path) = (
            in_dir(&args.events_dir, "jsonl"),
            in_dir(&args.report_dir, "html"),
        );
        if let Ok(o) = &result {
            if let Err(code) =
                write_run_files(&o.events, events_path.as_deref(), report_path.as_deref())
            {
                return code;
            }
        }
        let result = match result {
            Ok(o) => {
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
                Ok(o)
            }
            Err(BackendError::Interrupted { message, .. }) => {
                println!("  ERROR {:<32} {message}", s.name);
                interrupted = true;
                Err(message)
            }
            Err(e) => {
                println!("  ERROR {:<32} {e}", s.name);
                Err(e.to_string())
            }
        };
        results.push(result);
        events_paths.push(events_path);
        report_paths.push(report_path);
        if interrupted {
            break;
        }
    }
    let held = results
        .iter()
        .filter(|r| r.as_ref().is_ok_and(|o| o.held()))
        .count();
    let violated = results
        .iter()
        .filter(|r| r.as_ref().is_ok_and(|o| !o.held()))
        .count();
    let errors = results.len() - held - violated;
    let code = if errors > 0 {
        exit::ENVIRONMENT
    } else if violated > 0 {
        exit::VIOLATED
    } else {
        exit::HELD
    };
    println!(
        "\nsuite: {} scenario(s): {held} held, {violated} violated, {errors} could not run{} ({:.1}s)",
        results.len(),
        if interrupted { "; interrupted" } else { "" },
        started.elapsed().as_secs_f64()
    );
    let entries: Vec<Entry<'_>> = scenarios
        .iter()
        .zip(&results)
        .zip(events_paths.iter().zip(&report_paths))
        .map(|((s, r), (e, h))| Entry {
            scenario: s,
            outcome: r.as_ref().map_err(Clone::clone),
            events_path: e.as_deref(),
            report_path: h.as_deref(),
        })
        .collect();
    if let Err(code) = write_reports(
        &entries,
        args.backend,
        args.seed,
        code,
        args.junit.as_deref(),
        args.json.as_deref(),
    ) {
        return code;
    }
    code
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

fn list_cmd() -> i32 {
    let mut seen = std::collections::BTreeSet::new();
    let mut rows: Vec<(String, String)> = Vec::new();
    for dir in scenario::search_dirs() {
        for path in yaml_files(&dir) {
            let Some(stem) = path.file_stem().map(|s| s.to_string_lossy().into_owned()) else {
                continue;
            };
            if !seen.insert(stem.clone()) {
                continue;
            }
            rows.push(match scenario::load(&path) {
                Ok(s) => {
                    let summary = s
                        .description
                        .split_terminator(['\n'])
                        .next()
                        .unwrap_or("")
                        .trim()
                        .to_owned();
                    (s.name, summary)
                }
                Err(e) => {
                    let first = e.to_string().lines().next().unwrap_or("").to_owned();
                    (stem, format!("(invalid: {first})"))
                }
            });
        }
    }
    let any = !rows.is_empty();
    let width = rows
        .iter()
        .map(|(n, _)| n.chars().count())
        .max()
        .unwrap_or(0);
    for (name, summary) in rows {
        println!("{name:<width$}  {summary}");
    }
    if !any {
        eprintln!("kubechaos: no scenarios found in ./scenarios");
    }
    std::io::stdout().flush().ok();
    exit::HELD
}

fn validate_cmd(paths: &[PathBuf], backend: Backend, provider: Provider) -> i32 {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let found = yaml_files(p);
            if found.is_empty() {
                eprintln!("{}: no .yaml files in this directory", p.display());
                return exit::BAD_INPUT;
            }
            files.extend(found);
        } else {
            files.push(p.clone());
        }
    }
    let mut bad = 0;
    for f in &files {
        let loaded = scenario::load(f).map_err(|e| {
            print_load_error(&e);
        });
        let loaded = loaded.and_then(|s| {
            let problems = backend_of(
                backend,
                DEFAULT_SEED,
                Duration::from_millis(kubechaos_engine::backend::sim::DEFAULT_TICK_MS),
                false,
                kubechaos_engine::backend::kube::KubeTarget {
                    provider: provider.into(),
                    ..Default::default()
                },
            )
            .check(&s);
            if problems.is_empty() {
                Ok(s)
            } else {
                print_unsupported(&s, backend.name(), problems);
                Err(())
            }
        });
        match loaded {
            Ok(s) => println!(
                "ok  {} ({}: {} fault step{}, {} invariant{})",
                f.display(),
                s.name,
                s.faults.len(),
                if s.faults.len() == 1 { "" } else { "s" },
                s.expect.len(),
                if s.expect.len() == 1 { "" } else { "s" }
            ),
            Err(()) => bad += 1,
        }
    }
    if bad > 0 {
        eprintln!(
            "{bad} of {} file{} invalid",
            files.len(),
            if files.len() == 1 { "" } else { "s" }
        );
        exit::BAD_INPUT
    } else {
        exit::HELD
    }
}

fn agent_cmd(args: &AgentArgs) -> i32 {
    use kubechaos_core::scenario::AgentMode;
    let Some((namespace, name)) = args
        .lease
        .split_once('/')
        .filter(|(ns, n)| !ns.is_empty() && !n.is_empty() && !n.contains('/'))
    else {
        eprintln!(
            "kubechaos agent: --lease {}: expected NAMESPACE/NAME, for example default/agent-lock",
            args.lease
        );
        return exit::BAD_INPUT;
    };
    let mode = match args.mode.as_str() {
        "give-up" => AgentMode::GiveUp,
        "stuck-on-stop" => AgentMode::StuckOnStop,
        _ => AgentMode::Correct,
    };
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "agent".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let identity = args
        .identity
        .clone()
        .unwrap_or_else(|| format!("{hostname}_{:08x}", nanos as u32 ^ std::process::id()));
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    rt.block_on(async {
        // client-go bounds leader-election requests by the renew deadline; 5s keeps each try
        // inside it, as the sim's clients do.
        let client = match kubechaos_engine::kubeclient::client(
            args.kubeconfig.as_deref(),
            args.context.as_deref(),
            Some(Duration::from_secs(5)),
        )
        .await
        {
            Ok(c) => c,
            Err(e) => {
                eprintln!("kubechaos agent: {e}");
                return exit::ENVIRONMENT;
            }
        };
        let process = kubechaos_core::events::identity_process(&identity).to_owned();
        kubechaos_engine::agent::run(kubechaos_engine::agent::AgentParams {
            client,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            identity: identity.clone(),
            mode,
            clock: std::sync::Arc::new(kubechaos_engine::clock::SystemClock),
            rng: kubechaos_engine::clock::Rng::new(nanos, &identity),
            reporter: std::sync::Arc::new(kubechaos_engine::agent::JsonLinesReporter),
            note: Box::new(move |m| {
                kubechaos_engine::agent::JsonLinesReporter::emit(
                    &kubechaos_core::events::EventKind::ProcessNote {
                        process: process.clone(),
                        message: m.to_owned(),
                    },
                )
            }),
        })
        .await;
        exit::HELD
    })
}

fn cluster_status() -> i32 {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Api, ListParams};
    use kubechaos_engine::backend::local::cluster::RunRecord;
    let runs = RunRecord::all();
    if runs.is_empty() {
        println!("no local control plane on this machine (start one with `kubechaos cluster up`)");
        return exit::HELD;
    }
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    for (dir, r) in runs {
        let state = if r.alive() {
            "running"
        } else if r.keep {
            "ended (directory kept)"
        } else {
            "ended without cleaning up (`kubechaos cluster down` removes it)"
        };
        println!("{}  {}  pid {}  {state}", dir.display(), r.purpose, r.pid);
        if !r.alive() {
            continue;
        }
        println!("  export KUBECONFIG={}", r.kubeconfig.display());
        rt.block_on(async {
            let t = Some(Duration::from_secs(3));
            let Ok(client) =
                kubechaos_engine::kubeclient::client(Some(&r.kubeconfig), None, t).await
            else {
                println!("  API: cannot read its kubeconfig");
                return;
            };
            let req = http::Request::get("/readyz")
                .body(Vec::new())
                .expect("request");
            match client.request_text(req).await {
                Ok(text) if text.trim() == "ok" => println!("  API: ready"),
                Ok(text) => println!("  API: not ready ({})", text.trim()),
                Err(kube::Error::Api(s)) => {
                    println!(
                        "  API: not ready (readyz answered {}: {})",
                        s.code,
                        s.message
                            .lines()
                            .filter(|l| l.starts_with("[-]"))
                            .collect::<Vec<_>>()
                            .join(" ")
                    );
                    return;
                }
                Err(e) => {
                    println!("  API: not reachable ({e})");
                    return;
                }
            }
            if let Ok(leases) = Api::<Lease>::all(client.clone())
                .list(&ListParams::default())
                .await
            {
                for l in leases.items {
                    let ns = l.metadata.namespace.unwrap_or_default();
                    let name = l.metadata.name.unwrap_or_default();
                    if ns == "kube-node-lease" || name.starts_with("apiserver-") {
                        continue;
                    }
                    let holder = l
                        .spec
                        .and_then(|s| s.holder_identity)
                        .filter(|h| !h.is_empty());
                    println!(
                        "  lease {ns}/{name}: {}",
                        holder.as_deref().unwrap_or("not held")
                    );
                }
            }
            if let Ok(nodes) = Api::<Node>::all(client).list(&ListParams::default()).await {
                let ready = nodes
                    .items
                    .iter()
                    .filter(|n| kubechaos_engine::kubeclient::schedulable(n))
                    .count();
                println!(
                    "  nodes: {ready}/{} Ready and schedulable",
                    nodes.items.len()
                );
            }
        });
    }
    exit::HELD
}

fn cluster_down(only: Option<&Path>) -> i32 {
    use kubechaos_engine::backend::local::cluster::RunRecord;
    let mut runs = RunRecord::all();
    if let Some(dir) = only {
        let wanted = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        runs.retain(|(d, _)| std::fs::canonicalize(d).unwrap_or_else(|_| d.clone()) == wanted);
        if runs.is_empty() {
            eprintln!(
                "kubechaos: {} is not a local control plane's run directory (it has no {}); expected one that `kubechaos cluster status` lists",
                dir.display(),
                RunRecord::FILE
            );
            return exit::BAD_INPUT;
        }
    }
    if only.is_none() {
        // Scenario runs stop themselves (Ctrl-C); without a DIR only `cluster up` is stopped.
        runs.retain(|(_, r)| r.purpose == "cluster up" || !r.alive());
    }
    let mut acted = false;
    for (dir, r) in runs {
        if r.alive() {
            acted = true;
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(r.pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            eprintln!(
                "kubechaos: stopping {} ({}, pid {})",
                dir.display(),
                r.purpose,
                r.pid
            );
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while r.alive() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            if r.alive() {
                eprintln!("kubechaos: pid {} did not stop within 30s", r.pid);
                return exit::ENVIRONMENT;
            }
            println!(
                "stopped {}{}",
                dir.display(),
                if dir.exists() {
                    " (directory kept)"
                } else {
                    ""
                }
            );
        } else if !r.keep {
            acted = true;
            // Its children ended with it (parent-death signal); only the directory is left.
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                eprintln!("kubechaos: cannot remove {}: {e}", dir.display());
                return exit::ENVIRONMENT;
            }
            println!(
                "removed {} (left by a kubechaos that was killed)",
                dir.display()
            );
        }
    }
    if !acted {
        println!("no local control plane is running");
    }
    exit::HELD
}

fn recover_exit(e: &kubechaos_engine::recover::RecoverError) -> i32 {
    eprintln!("kubechaos recover: {e}");
    match e {
        kubechaos_engine::recover::RecoverError::Refused(_) => exit::BAD_INPUT,
        kubechaos_engine::recover::RecoverError::Cluster(_) => exit::ENVIRONMENT,
    }
}

async fn recover_client(k: &KubeArgs) -> Result<kube::Client, i32> {
    kubechaos_engine::kubeclient::client(
        k.kubeconfig.as_deref(),
        k.context.as_deref(),
        Some(Duration::from_secs(10)),
    )
    .await
    .map_err(|e| {
        eprintln!("kubechaos recover: {e}");
        exit::ENVIRONMENT
    })
}

fn recover_pod_from(args: &PodFromArgs) -> i32 {
    use kubechaos_engine::recover::{self, Workload};
    let w = match Workload::parse(&args.kube.namespace, &args.workload) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("kubechaos recover: {e}");
            return exit::BAD_INPUT;
        }
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    rt.block_on(async {
        let client = match recover_client(&args.kube).await {
            Ok(c) => c,
            Err(code) => return code,
        };
        if args.cleanup && w.kind == recover::Kind::PodTemplate {
            eprintln!("kubechaos recover: --cleanup needs a workload that reports availability; a podtemplate does not (expected a deployment, daemonset, statefulset or replicaset)");
            return exit::BAD_INPUT;
        }
        let pod = match recover::prepare(&client, &w, &args.node, &recover::suffix()).await {
            Ok((_, pod)) => pod,
            Err(e) => return recover_exit(&e),
        };
        if args.dry_run {
            let text = if args.output == "json" {
                serde_json::to_string_pretty(&pod).expect("json") + "\n"
            } else {
                serde_saphyr::to_string(&pod).expect("yaml")
            };
            print!("{text}");
            return exit::HELD;
        }
        let created = match recover::create(&client, &pod).await {
            Ok(p) => p,
            Err(e) => return recover_exit(&e),
        };
        let name = created.metadata.name.unwrap_or_default();
        let ns = &w.namespace;
        println!("pod/{name} created in {ns} from {w}'s template, bound to {}", args.node);
        if !args.cleanup {
            println!("delete it once {w} is available again: kubectl delete pod -n {ns} {name} (or use --cleanup)");
            return exit::HELD;
        }
        let started = std::time::Instant::now();
        let mut next_say = started;
        loop {
            let seen = recover::ready_replicas(&client, &w).await.ok().flatten();
            if let Some((available, desired)) = seen {
                if desired > 0 && available >= desired {
                    let pods = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), ns);
                    if let Err(e) = pods.delete(&name, &Default::default()).await {
                        eprintln!("kubechaos recover: {w} is available again, but pod/{name} could not be deleted: {e}");
                        return exit::ENVIRONMENT;
                    }
                    println!("{w} has its pods Ready again ({available}/{desired}); deleted pod/{name}");
                    return exit::HELD;
                }
                if std::time::Instant::now() >= next_say {
                    eprintln!("waiting for {w} to be available: {available}/{desired} ({}s)", started.elapsed().as_secs());
                    next_say += Duration::from_secs(10);
                }
            }
            if started.elapsed() > args.timeout {
                eprintln!("kubechaos recover: {w} was not available within {}; pod/{name} is left running", scenario::duration::human(args.timeout));
                return exit::VIOLATED;
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    })
}

fn recover_bind(args: &BindArgs) -> i32 {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let ns = &args.kube.namespace;
    rt.block_on(async {
        let client = match recover_client(&args.kube).await {
            Ok(c) => c,
            Err(code) => return code,
        };
        if let Err(e) = kubechaos_engine::recover::check_node(&client, &args.node, None).await {
            return recover_exit(&e);
        }
        let pods = match &args.pod {
            Some(p) => vec![p.clone()],
            None => match kubechaos_engine::recover::pending(&client, ns, &args.selector).await {
                Ok(p) => p,
                Err(e) => return recover_exit(&e),
            },
        };
        if pods.is_empty() {
            println!(
                "no pending pod in {ns}{}",
                if args.selector.is_empty() {
                    String::new()
                } else {
                    format!(" matching {}", args.selector)
                }
            );
            return exit::HELD;
        }
        let mut code = exit::HELD;
        for pod in pods {
            match kubechaos_engine::recover::bind(&client, ns, &pod, &args.node).await {
                Ok(()) => println!("pod/{pod} bound to {}", args.node),
                Err(e) => code = code.max(recover_exit(&e)),
            }
        }
        code
    })
}

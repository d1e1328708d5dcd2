//! The command line as clap parses it: commands, flags, help and examples. What each command
//! does is in [`crate::commands`].

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::failure::Failure;
use kubechaos_core::error::SyntaxError;
use kubechaos_core::scenario;
use kubechaos_engine::backend::kube::Provider as EngineProvider;
use kubechaos_engine::run::{Playable, DEFAULT_SEED};

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
  source <(kubechaos completion bash)            shell completion (bash, zsh, fish, ...)
  kubechaos scenario api-restart --json - | jq .exit_code   the summary alone on stdout

-v/-vv/-vvv more log output on stderr (and every observed event in a scenario's timeline),
-q only errors; RUST_LOG, when set, decides instead.

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
    pub(crate) command: Command,
    /// More log output on stderr: -v info (and, for `scenario`, every observed event), -vv
    /// debug, -vvv trace. `RUST_LOG`, when set, decides instead.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub(crate) verbose: u8,
    /// Only errors in the log output on stderr (the report is printed as always).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub(crate) quiet: bool,
}

impl Cli {
    /// The log filter the flags ask for (when `RUST_LOG` is not set).
    pub(crate) fn log_filter(&self) -> &'static str {
        match (self.quiet, self.verbose) {
            (true, _) => "error,kube_client=off",
            (false, 0) => "warn,kube_client=off",
            // kube-rs's own error lines (a 500 from an API server that is still starting, a
            // watch cut by a fault) are what a run expects; kubechaos says what matters of them.
            (false, 1) => "info,kube_client=off",
            (false, 2) => "debug",
            (false, _) => "trace",
        }
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Play a scenario and judge its invariants.
    #[command(
        after_help = "Examples:\n  kubechaos scenario api-restart\n  kubechaos scenario scenarios/delete-all-schedulers.yaml --seed 42 -v\n  kubechaos scenario delete-both --backend local\n  kubechaos scenario api-restart --events run.jsonl --junit junit.xml --report run.html\n  kubechaos scenario agent-api-restart --backend local --keep\n  kubechaos scenario scenarios-kube/api-server-restart.yaml --backend kube --context kind-chaos\n  kubechaos scenario scenarios-kind/remove-the-scheduler.yaml --backend kube --context kind-chaos --dry-run\n\nOn --backend kube the provider (kind, k3s, generic) comes from the context name or the nodes,\nor from --provider; a step it cannot do is exit 2 before anything runs, with what it can do.\nOn --backend local the run takes the scenario's time in real time plus about 15s; Ctrl-C\nstops every process it started and removes its run directory (exit 3).\nWhile a real-time run plays, a live view on a terminal shows the current step, the time to the\nnext, each lease's holder (or how long ago it expired) and a countdown on each invariant; when\nstandard error is not a terminal, or CI is set, that is a plain status line every 30s."
    )]
    Scenario(ScenarioArgs),
    /// Play every scenario of a directory (or the files given), one after the other, and write
    /// one report for all of them.
    #[command(
        after_help = "Examples:\n  kubechaos suite                                   every file in ./scenarios, on the sim\n  kubechaos suite scenarios/ --junit junit.xml --json summary.json --events-dir events/\n  kubechaos suite scenarios/ --report-dir reports/                  a page per scenario\n  kubechaos suite chaos/ --markdown \"$GITHUB_STEP_SUMMARY\"          the verdicts as a table\n  kubechaos suite scenarios/api-restart.yaml scenarios/delete-both.yaml --backend local\n\nEvery file is validated (and checked against the backend) before anything runs: a problem in\nany of them is exit 2 and nothing runs. Then each scenario plays in turn; one that cannot run\n(its cluster did not start) is reported and the suite goes on.\nExit codes: 0 every invariant of every scenario held, 1 some invariant was violated, 2 bad\ninput, 3 some scenario could not run (or the suite was interrupted)."
    )]
    Suite(SuiteArgs),
    /// Generate fault schedules against a topology on the sim, run them, and shrink each
    /// violation to the smallest schedule that still breaks the invariant, written out as a
    /// scenario file that replays it.
    #[command(
        after_help = "Examples:\n  kubechaos explore agent-give-up                    topologies/agent-give-up.yaml, 200 schedules\n  kubechaos explore control-plane --runs 2000 --max-faults 5 --seed 7\n  kubechaos explore my-topology.yaml --shard 2/8 --out found/   one machine of eight\n  kubechaos explore agent-give-up --confirm local     each finding replayed on a real control plane\n\nA topology is a scenario file: its cluster and invariants are kept, its faults generated (API-server\nstops, crashes and restarts, kills, removals, partitions with the API server, one way or both,\nleader-targeted or by replica). Case K is the same wherever it runs (its schedule comes from\n--seed and K alone), so N shards of --runs R run exactly the R cases of one exploration.\nEach violated invariant's first case is shrunk (fewer faults, shorter, earlier, simpler) and\nwritten to OUT/TOPOLOGY-HASH.yaml with the command that replays it.\nExit codes: 0 nothing violated, 1 violations found (files written), 2 bad input, 3 the\nenvironment failed."
    )]
    Explore(ExploreArgs),
    /// Render an events file (written by --events or --events-dir) as the HTML report, the same
    /// page that --report writes during the run.
    #[command(
        after_help = "Examples:\n  kubechaos report run.jsonl                     writes run.html\n  kubechaos report events/api-restart.jsonl -o api-restart.html\n\nThe page needs no network: open it in any browser. Hover over an item for its details, click\nto keep them (the address then names the item: #item=ID).\nExit codes: 0 written, 2 the events file cannot be read or is not one, 3 the report cannot be\nwritten."
    )]
    Report(ReportArgs),
    /// List the scenarios in ./scenarios (and the shipped ones).
    List {
        /// `json`: one JSON array on stdout ({name, summary, file} each).
        #[arg(short = 'o', long, value_enum, default_value = "text")]
        output: Output,
    },
    /// Check scenario files (or directories of them) without running anything.
    #[command(
        after_help = "Every problem is reported as FILE:LINE:COL: what is wrong; what was expected.\nExit code 2 when any file has a problem."
    )]
    Validate {
        /// Files, directories, or names of scenarios (as `scenario NAME` takes them).
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// Check that this backend can run them (default: a file is valid when some backend can
        /// run it, and each line says which can).
        #[arg(long, value_enum)]
        backend: Option<Backend>,
        /// With `--backend kube`: also check that this provider can do their faults.
        #[arg(long, value_enum, default_value = "auto")]
        provider: Provider,
        /// `json`: one JSON array on stdout ({file, name, valid, runs_on, problems} each); the
        /// problems are also said on stderr as usual.
        #[arg(short = 'o', long, value_enum, default_value = "text")]
        output: Output,
    },
    /// Print the JSON Schema of scenario files.
    Schema,
    /// Set up a chaos directory in your own repository: a first scenario for your Lease on the
    /// sim, one for your software in your cluster, and the schema editors use.
    #[command(
        after_help = "Examples:\n  kubechaos init --lease my-operator/my-operator-lock\n  kubechaos init --lease kube-system/cert-manager-controller --namespace cert-manager --selector app.kubernetes.io/name=cert-manager\n  kubechaos init --dir test/chaos --lease ops/op-lock --force\n  kubechaos init --lease ops/op-lock --ci github             and the nightly workflow\n\nWrites DIR/NAME-api-outage.yaml (the sim and local play it), DIR/cluster/NAME.yaml (a pod agent:\nyour pods in your cluster, --backend kube) and DIR/scenario.schema.json; with --ci github,\n.github/workflows/kubechaos.yml; with --ci gitlab, .gitlab/kubechaos.gitlab-ci.yml (and a\n.gitlab-ci.yml including it, if there is none). Run it at your repository's root. Running it\nagain changes nothing; a file that differs is not overwritten without --force (exit 2, nothing\nwritten).\nThen: kubechaos suite DIR"
    )]
    Init(InitArgs),
    /// Print the shell completion script for kubechaos.
    #[command(
        after_help = "Examples:\n  source <(kubechaos completion bash)                          this shell\n  kubechaos completion bash > ~/.local/share/bash-completion/completions/kubechaos\n  kubechaos completion zsh > \"${fpath[1]}/_kubechaos\"\n  kubechaos completion fish > ~/.config/fish/completions/kubechaos.fish"
    )]
    Completion {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
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
    /// With --cleanup: undo what a kubechaos run that was killed outright left in a kind or k3d
    /// cluster.
    #[command(
        args_conflicts_with_subcommands = true,
        subcommand_required = false,
        after_help = "Examples:\n  kubechaos recover pod-from deployment/kube-scheduler -n kube-system --node cp-1\n  kubechaos recover bind --all-pending -n kube-system --node cp-1\n  kubechaos recover --cleanup --context kind-chaos\n\n--cleanup is for a run that could not clean up after itself (kubechaos killed with SIGKILL, the\nmachine restarted): in each node container of the cluster (found by kind's or k3d's labels), it\nends the loops that kill a crashing static pod's container, moves static pod manifests\nkubechaos held back into /etc/kubernetes/manifests, removes every iptables rule with the comment `kubechaos`, and unpauses a paused node; on this machine it removes\nthe directories a killed run left under $TMPDIR (kubechaos-agents-*: its agents' kubeconfigs);\nthen, once the API server answers, it deletes the namespaces a run made (label\napp.kubernetes.io/managed-by=kubechaos) and the objects it created elsewhere (label\nkubechaos.io/made-by-run: its manifests' objects, its agents' Leases), and names any recovery\npod left. It says what it did. Run it while no kubechaos run plays on\nthat cluster. Exit codes: 0 nothing left, 1 something could not be undone or the API server did\nnot answer within --timeout, 2 bad input, 3 Docker or the cluster could not be reached."
    )]
    Recover(RecoverArgs),
}

/// `kubechaos recover`: a subcommand, or `--cleanup`.
#[derive(Debug, clap::Args)]
pub(crate) struct RecoverArgs {
    #[command(subcommand)]
    pub(crate) command: Option<RecoverCommand>,
    /// Undo what a kubechaos run killed outright left in the cluster's nodes and objects.
    #[arg(long)]
    pub(crate) cleanup: bool,
    /// How long --cleanup waits for the API server to answer once the nodes are restored.
    #[arg(long, default_value = "3m", value_parser = parse_duration)]
    pub(crate) timeout: Duration,
    #[command(flatten, next_help_heading = "The cluster")]
    pub(crate) target: TargetArgs,
}

/// `--backend`: which world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Backend {
    /// A deterministic simulated cluster.
    Sim,
    /// A real control plane started on this machine from upstream binaries.
    Local,
    /// An existing cluster from a kubeconfig context.
    Kube,
}

impl Backend {
    /// As written on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Backend::Sim => "sim",
            Backend::Local => "local",
            Backend::Kube => "kube",
        }
    }
}

/// The backend `--backend` names, with its options: the one place the command line's choice
/// becomes a world.
pub(crate) fn backend_of(
    backend: Backend,
    seed: Option<u64>,
    tick_ms: Option<u64>,
    keep: bool,
    kube: kubechaos_engine::backend::kube::KubeTarget,
) -> Box<dyn Playable> {
    use kubechaos_engine::backend::sim::Sim;
    use kubechaos_engine::backend::{kube::Kube, local::run::Local, local::run::LocalOptions};
    match backend {
        Backend::Sim => Box::new(Sim::new(sim_options(seed, tick_ms))),
        Backend::Local => Box::new(Local::new(LocalOptions { keep })),
        Backend::Kube => Box::new(Kube::new(kube)),
    }
}

/// The sim's options from `--seed` and `--tick-ms`: what they leave unset comes from a
/// scenario's `sim:` settings, else the defaults.
pub(crate) fn sim_options(
    seed: Option<u64>,
    tick_ms: Option<u64>,
) -> kubechaos_engine::backend::sim::SimOptions {
    use kubechaos_engine::backend::sim::{FromFile, SimOptions, DEFAULT_TICK_MS};
    SimOptions {
        seed: seed.unwrap_or(DEFAULT_SEED),
        tick: Duration::from_millis(tick_ms.unwrap_or(DEFAULT_TICK_MS)),
        from_file: FromFile {
            seed: seed.is_none(),
            step: tick_ms.is_none(),
        },
    }
}

/// `--provider`: the kube backend's providers, as the command line names them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Provider {
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
    pub(crate) fn name(self) -> &'static str {
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
pub(crate) struct KubeArgs {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster).
    #[arg(long, value_name = "FILE")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long)]
    pub(crate) context: Option<String>,
    /// Namespace.
    #[arg(short = 'n', long, default_value = "default")]
    pub(crate) namespace: String,
}

/// Which existing cluster `--backend kube` touches, and the safety guard's allow-list.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct TargetArgs {
    /// The kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: its current context).
    #[arg(long)]
    pub(crate) context: Option<String>,
    /// Allow this context although it does not look disposable (the guard allows
    /// only `kind-*`, `k3d-*` and kubechaos's own `kubechaos-local`). Repeatable.
    #[arg(long, value_name = "NAME")]
    pub(crate) allow_context: Vec<String>,
    /// kubechaos's configuration file, whose `allow-contexts` the guard allows too
    /// (default: $KUBECHAOS_CONFIG, else ~/.config/kubechaos/config.yaml if it exists).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// How kubechaos reaches the cluster's machines for faults the API cannot do
    /// (default: from the context name, `kind-*` or `k3d-*`, else from the nodes).
    #[arg(long, value_enum, default_value = "auto")]
    pub(crate) provider: Provider,
}

impl TargetArgs {
    /// The target, once the guard let it through. Empty unless `kube`.
    pub(crate) fn guarded(
        &self,
        backend: Backend,
    ) -> Result<kubechaos_engine::backend::kube::KubeTarget, Failure> {
        use kubechaos_engine::backend::kube::{self, error::KubeError, KubeTarget};
        if backend != Backend::Kube {
            return Ok(Default::default());
        }
        if self.provider == Provider::K3sContainer {
            // Its own cluster, made for the run: no context to guard.
            if !cfg!(feature = "testcontainers") {
                return Err(KubeError::NoTestcontainers.into());
            }
            return Ok(KubeTarget {
                provider: self.provider.into(),
                ..Default::default()
            });
        }
        let config = kubechaos_engine::config::load(self.config.as_deref())?;
        let mut allow = self.allow_context.clone();
        allow.extend(config.allow_contexts);
        let context = kube::resolve_context(self.kubeconfig.as_deref(), self.context.as_deref())?;
        kube::guard(&context, &allow)?;
        let provider = match self.provider {
            Provider::Auto => EngineProvider::from_context(&context).unwrap_or_default(),
            p => p.into(),
        };
        Ok(KubeTarget {
            kubeconfig: self.kubeconfig.clone(),
            context: Some(context),
            allow,
            provider,
        })
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum RecoverCommand {
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
pub(crate) struct PodFromArgs {
    /// The workload, KIND/NAME (as kubectl names it: deployment/x, ds/x, sts/x, rs/x, podtemplate/x).
    #[arg(value_name = "KIND/NAME")]
    pub(crate) workload: String,
    /// The node to run the pod on: it must exist and be Ready.
    #[arg(long)]
    pub(crate) node: String,
    /// Print the pod instead of creating it.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Output format of --dry-run.
    #[arg(short = 'o', long, default_value = "yaml", value_parser = ["yaml", "json"])]
    pub(crate) output: String,
    /// Wait until the workload's own pods are Ready again, then delete the recovery pod.
    #[arg(long)]
    pub(crate) cleanup: bool,
    /// How long --cleanup waits.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub(crate) timeout: Duration,
    #[command(flatten)]
    pub(crate) kube: KubeArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct BindArgs {
    /// The pending pod's name.
    #[arg(
        value_name = "POD",
        required_unless_present = "all_pending",
        conflicts_with = "all_pending"
    )]
    pub(crate) pod: Option<String>,
    /// The node to bind to: it must exist and be Ready.
    #[arg(long)]
    pub(crate) node: String,
    /// Bind every pending pod in the namespace (that matches -l).
    #[arg(long)]
    pub(crate) all_pending: bool,
    /// Label selector for --all-pending, as kubectl -l takes it.
    #[arg(short = 'l', long, default_value = "", requires = "all_pending")]
    pub(crate) selector: String,
    #[command(flatten)]
    pub(crate) kube: KubeArgs,
}

/// How a command prints what it found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Output {
    /// Lines for people.
    Text,
    /// JSON on stdout, for scripts.
    Json,
}

/// A CI system `kubechaos init --ci` writes a pipeline for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum CiSystem {
    /// GitHub Actions: .github/workflows/kubechaos.yml, using kubechaos's action.
    Github,
    /// GitLab CI: .gitlab/kubechaos.gitlab-ci.yml, including kubechaos's template.
    Gitlab,
}

#[derive(Debug, clap::Args)]
pub(crate) struct InitArgs {
    /// The Lease your software competes for, NAMESPACE/NAME.
    #[arg(long, value_name = "NS/NAME")]
    pub(crate) lease: String,
    /// The directory to set up.
    #[arg(long, default_value = "chaos", value_name = "DIR")]
    pub(crate) dir: PathBuf,
    /// The agent's and the scenarios' name (default: made from the Lease's name).
    #[arg(long)]
    pub(crate) name: Option<String>,
    /// The namespace of your software's pods (default: the Lease's).
    #[arg(short = 'n', long, value_name = "NS")]
    pub(crate) namespace: Option<String>,
    /// The label selector of your software's pods (default: app=NAME).
    #[arg(short = 'l', long, value_name = "LABELS")]
    pub(crate) selector: Option<String>,
    /// Also write the nightly pipeline for your repository (paths from the current directory,
    /// your repository's root): one job plays DIR on the sim, one your software in a kind cluster.
    #[arg(long, value_enum, value_name = "SYSTEM")]
    pub(crate) ci: Option<CiSystem>,
    /// Overwrite files that differ from what init writes.
    #[arg(long)]
    pub(crate) force: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct AgentArgs {
    /// The Lease to compete for, NAMESPACE/NAME.
    #[arg(long, value_name = "NS/NAME")]
    pub(crate) lease: String,
    /// What to do on losing the lease: correct (be a candidate again), give-up (the elector
    /// returns and nothing restarts it), stuck-on-stop (stopping a module blocks forever), exit
    /// (exit 1, as a controller-runtime manager does: its kubelet starts it again).
    #[arg(long, default_value = "correct", value_parser = ["correct", "give-up", "stuck-on-stop", "exit"])]
    pub(crate) mode: String,
    /// Identity written into the Lease (default: HOSTNAME_RANDOM, as client-go programs do).
    #[arg(long)]
    pub(crate) identity: Option<String>,
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster).
    #[arg(long, value_name = "FILE")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long)]
    pub(crate) context: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ClusterCommand {
    /// Build etcd, kube-apiserver, kube-scheduler and kube-controller-manager at the pinned
    /// versions (fixtures/control-plane) into ~/.cache/kubechaos (or $KUBECHAOS_CACHE), once.
    #[command(
        after_help = "Needs Go 1.26+ and the Go module proxy. Takes about 10 minutes on 2 cores the first time;\nlater calls find the binaries and return at once. Prints where they are."
    )]
    Build,
    /// Start a local control plane and keep it running until Ctrl-C (or for --for).
    #[command(
        after_help = "Examples:\n  kubechaos cluster up                       3 nodes, 2 schedulers, 2 controller-managers\n  kubechaos cluster up --nodes 1 --for 30s   up for 30 seconds, then cleaned away\n  kubechaos cluster up --api-servers 3 --etcd-members 3 --schedulers 3\n                                             three of each (api-server-N, etcd-N)\n\nPrints the KUBECONFIG to use with kubectl. Everything it started is stopped, and its run\ndirectory removed (unless --keep), when it ends."
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
pub(crate) struct UpArgs {
    /// Fake nodes.
    #[arg(long, default_value_t = 3)]
    pub(crate) nodes: u32,
    /// kube-scheduler replicas.
    #[arg(long, default_value_t = 2)]
    pub(crate) schedulers: u32,
    /// kube-controller-manager replicas.
    #[arg(long, default_value_t = 2)]
    pub(crate) controller_managers: u32,
    /// kube-apiservers on the one etcd, each client's connections landing on the one its
    /// replica number names (as `cluster.api-servers` in a scenario); kubectl's kubeconfig
    /// names a balancer that sends each connection to a ready one.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=i64::from(scenario::MAX_API_SERVERS)))]
    pub(crate) api_servers: u32,
    /// etcd members of one cluster: 1, 3, 5 or 7 (as `cluster.etcd.members`).
    #[arg(long, default_value_t = 1, value_parser = parse_members)]
    pub(crate) etcd_members: u32,
    /// Run the scheduler and controller-manager as Deployments in kube-system, their pods run by
    /// the fake nodes (bootstrapped through temporary pods, then handed over): a cluster to
    /// break and recover by hand with `kubectl delete pods` and `kubechaos recover`.
    #[arg(long)]
    pub(crate) self_hosted: bool,
    /// Stop after this long (e.g. 30s) instead of waiting for Ctrl-C.
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) for_: Option<Duration>,
    /// Keep the run directory (certificates, kubeconfigs, logs, etcd data) after stopping.
    #[arg(long)]
    pub(crate) keep: bool,
}

/// An etcd member count: odd, 1 to 7 (an even count tolerates no more failures than the odd one
/// below it).
fn parse_members(s: &str) -> Result<u32, String> {
    use scenario::{even_members_reason, MAX_ETCD_MEMBERS};
    match s.parse::<u32>() {
        Ok(n) if (1..=MAX_ETCD_MEMBERS).contains(&n) && n % 2 == 1 => Ok(n),
        Ok(n) if (1..=MAX_ETCD_MEMBERS).contains(&n) => {
            Err(format!("{}; expected 1, 3, 5 or 7", even_members_reason(n)))
        }
        _ => Err("expected 1, 3, 5 or 7".to_owned()),
    }
}

pub(crate) fn parse_duration(s: &str) -> Result<Duration, SyntaxError> {
    scenario::duration::parse(s)
}

/// The verdicts as files for CI and scripts (`scenario` and `suite` alike).
#[derive(Debug, clap::Args)]
pub(crate) struct SummaryArgs {
    /// Write a JUnit XML report: one testsuite per scenario, one testcase per invariant.
    #[arg(long, value_name = "FILE")]
    pub(crate) junit: Option<PathBuf>,
    /// Write a JSON summary of every scenario and invariant (each verdict and its message, the
    /// exit code); `-`: on standard output, everything else on standard error.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// Write the verdicts as a Markdown table, for a CI job's summary page
    /// (`--markdown "$GITHUB_STEP_SUMMARY"`).
    #[arg(long, value_name = "FILE")]
    pub(crate) markdown: Option<PathBuf>,
}

impl SummaryArgs {
    /// Each file asked for, with what it is.
    pub(crate) fn files(&self) -> [(Option<&std::path::Path>, &'static str); 3] {
        [
            (self.junit.as_deref(), "JUnit report"),
            (self.json.as_deref(), "JSON summary"),
            (self.markdown.as_deref(), "Markdown summary"),
        ]
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct ScenarioArgs {
    /// A scenario name (found as scenarios/NAME.yaml) or a path to a file.
    #[arg(value_name = "NAME|PATH")]
    pub(crate) scenario: String,
    /// Where to run it.
    #[arg(long, value_enum, default_value = "sim")]
    pub(crate) backend: Backend,
    /// Seed of the simulation: the same seed gives the same run, event for event (default: the
    /// file's `sim.seed`, else 1).
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Write the observed timeline as JSON lines.
    #[arg(long, value_name = "FILE")]
    pub(crate) events: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) summaries: SummaryArgs,
    /// Write the HTML report: one self-contained page with the run's timeline (faults, lease
    /// holders, processes, nodes, probe pods, each invariant's window and verdict).
    #[arg(long, value_name = "FILE")]
    pub(crate) report: Option<PathBuf>,
    /// Keep the run directory of a local run (certificates, kubeconfigs, logs, etcd data).
    #[arg(long)]
    pub(crate) keep: bool,
    /// Virtual milliseconds per simulation step (sim; default: the file's `sim.step`, else 10).
    #[arg(long, value_name = "MS", hide_short_help = true, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub(crate) tick_ms: Option<u64>,
    /// Print the plan (each step, how it is carried out, what undoes it) and touch nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    #[command(flatten, next_help_heading = "An existing cluster (--backend kube)")]
    pub(crate) target: TargetArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ExploreArgs {
    /// The topology: a scenario file, or a name in ./topologies (and the shipped ones).
    #[arg(value_name = "TOPOLOGY", default_value = "control-plane")]
    pub(crate) topology: String,
    /// Schedules in the whole exploration (all shards together).
    #[arg(long, default_value_t = 200)]
    pub(crate) runs: usize,
    /// Seed of the schedules and of every simulated run.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub(crate) seed: u64,
    /// At most this many faults in one schedule.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=20))]
    pub(crate) max_faults: u64,
    /// Run only this shard of the cases: I/N takes case K when K mod N = I.
    #[arg(long, value_name = "I/N", value_parser = kubechaos_engine::explore::parse_shard)]
    pub(crate) shard: Option<(usize, usize)>,
    /// Where the shrunk scenario files go (made if missing; checked writable before exploring).
    #[arg(long, value_name = "DIR", default_value = "explore-found")]
    pub(crate) out: PathBuf,
    /// Simulations run at once (default: the number of cores).
    #[arg(short = 'j', long)]
    pub(crate) jobs: Option<usize>,
    /// At most this many runs to shrink one violation.
    #[arg(long, default_value_t = 300)]
    pub(crate) max_shrink_runs: usize,
    /// Virtual milliseconds per simulation step (the written files replay with it).
    #[arg(long, default_value_t = kubechaos_engine::explore::TICK_MS, value_name = "MS", hide_short_help = true, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub(crate) tick_ms: u64,
    /// Replay each finding on a real backend and label it confirmed there or not (simulation
    /// finds, reality confirms): `local`, the control plane kubechaos starts on this machine
    /// (each finding takes its scenario's duration in real time).
    #[arg(long, value_enum, value_name = "BACKEND")]
    pub(crate) confirm: Option<ConfirmOn>,
}

/// Where `explore --confirm` replays its findings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ConfirmOn {
    /// A real control plane started on this machine from upstream binaries.
    Local,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ReportArgs {
    /// The events file (JSON lines).
    #[arg(value_name = "EVENTS.jsonl")]
    pub(crate) events: PathBuf,
    /// Where to write the page (default: the events file with `.html` in place of its extension).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct SuiteArgs {
    /// Scenario files or directories of them (default: ./scenarios).
    #[arg(value_name = "PATH")]
    pub(crate) paths: Vec<PathBuf>,
    /// Where to run them.
    #[arg(long, value_enum, default_value = "sim")]
    pub(crate) backend: Backend,
    /// Seed of every simulated run (default: each file's `sim.seed`, else 1).
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    #[command(flatten)]
    pub(crate) summaries: SummaryArgs,
    /// Write each scenario's observed timeline to DIR/NAME.jsonl (the reports name them).
    #[arg(long, value_name = "DIR")]
    pub(crate) events_dir: Option<PathBuf>,
    /// Write each scenario's HTML report to DIR/NAME.html (the reports name them).
    #[arg(long, value_name = "DIR")]
    pub(crate) report_dir: Option<PathBuf>,
    #[command(flatten, next_help_heading = "An existing cluster (--backend kube)")]
    pub(crate) target: TargetArgs,
}

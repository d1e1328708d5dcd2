//! The scenario model: what a scenario file says, typed. Version 1 of the scenario format
//! (`docs/scenario-format.md`).
//!
//! These types are also the source of the JSON Schema that `kubechaos schema` prints (schemars),
//! so the schema and the model cannot drift apart. Positions are kept beside values so that
//! validation can say where a problem stands.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;

use super::yaml::Pos;

/// A scenario file, decoded.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(
    title = "kubechaos scenario",
    description = "A kubechaos scenario file, version 1: the cluster it needs, the faults it plays and the invariants it judges.",
    deny_unknown_fields
)]
pub struct Scenario {
    /// Unique name; `kubechaos scenario NAME` finds `scenarios/NAME.yaml`.
    #[schemars(regex(pattern = r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"))]
    pub name: String,
    /// What the scenario does and what it proves.
    #[schemars(default)]
    pub description: String,
    /// What the scenario needs: sim and local build it, kube checks it.
    #[schemars(default)]
    pub cluster: Cluster,
    /// The timeline of faults; `at` is an offset from the start of the run.
    #[schemars(default)]
    pub faults: Vec<Step>,
    /// Invariants, judged on what was observed.
    #[schemars(default)]
    pub expect: Vec<Located<Invariant>>,
    /// How long the run lasts. Default: end of the last fault + the longest `within`/`for` + 30s.
    #[schemars(with = "Option<DurationText>")]
    pub duration: Option<Duration>,
    /// How the sim plays this file unless `--seed` or `--tick-ms` say otherwise: what a finding
    /// of `kubechaos explore` needs to fail as it failed there.
    #[schemars(default)]
    pub sim: SimSettings,
    /// Where the file came from (not part of the file).
    #[schemars(skip)]
    pub source: Source,
}

/// `sim: {seed, step}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SimSettings {
    /// The seed (default 1).
    pub seed: Option<u64>,
    /// Virtual time per simulation step (default 10ms).
    #[schemars(with = "Option<DurationText>")]
    pub step: Option<Duration>,
}

/// Where a scenario came from, for error messages.
#[derive(Clone, Debug, Default)]
pub struct Source {
    /// The file path as the user named it (or as found).
    pub path: PathBuf,
    /// Position of `duration:`, if given.
    pub duration_pos: Pos,
    /// Position of `name:`.
    pub name_pos: Pos,
}

/// A Go/Kubernetes-style duration: `500ms`, `20s`, `2m`, `1m30s`, `1h`.
#[derive(JsonSchema)]
#[schemars(transparent)]
#[allow(dead_code)]
pub struct DurationText(#[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"))] String);

/// The cluster a scenario needs.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Cluster {
    /// Fake nodes `node-0` … `node-(N-1)` that heartbeat (sim, local); on kube, at least this many Ready.
    #[schemars(default = "default_nodes", range(max = 100))]
    pub nodes: u32,
    /// API servers `api-server-0` … behind one address, as behind a load balancer (default 1:
    /// `api-server`).
    #[schemars(default = "default_replicas", range(min = 1, max = 5))]
    pub api_servers: u32,
    /// The etcd cluster behind them.
    #[schemars(default)]
    pub etcd: EtcdSpec,
    /// Where `api-servers` (else `etcd`) is written, for what a backend cannot run.
    #[schemars(skip)]
    pub topology_pos: Pos,
    /// Leader-elected control-plane components, by their upstream name.
    #[schemars(default)]
    pub components: BTreeMap<Component, ComponentSpec>,
    /// The components run as Deployments in kube-system, run by the node agent.
    #[schemars(default)]
    pub self_hosted: bool,
    /// Leader-elected workloads.
    #[schemars(default)]
    pub agents: Vec<AgentSpec>,
    /// Kubernetes manifests (YAML, paths relative to the scenario file) applied once the
    /// cluster is ready (local); a pod whose container has a `command` runs it on this machine.
    #[schemars(default, with = "Vec<String>")]
    pub manifests: Vec<Manifest>,
}

/// A manifest file of `cluster.manifests`, read and checked when the scenario is loaded.
#[derive(Clone, Debug)]
pub struct Manifest {
    /// The path as the scenario file writes it.
    pub written: String,
    /// The file, resolved against the scenario file's directory.
    pub file: PathBuf,
    /// Its objects, in file order, as JSON (each has `apiVersion`, `kind` and `metadata.name`).
    pub objects: Vec<serde_json::Value>,
    /// Where the scenario file names it.
    pub pos: Pos,
}

fn default_replicas() -> u32 {
    1
}

fn default_nodes() -> u32 {
    3
}

/// `cluster.etcd`.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct EtcdSpec {
    /// Members `etcd-0` … of one cluster (default 1: `etcd`); odd counts only.
    #[schemars(default = "default_replicas", range(min = 1, max = 7))]
    pub members: u32,
}

impl Default for EtcdSpec {
    fn default() -> Self {
        EtcdSpec { members: 1 }
    }
}

/// The most API servers a cluster may run (`cluster.api-servers`, `cluster up --api-servers`).
pub const MAX_API_SERVERS: u32 = 5;
/// The most etcd members a cluster may run (`cluster.etcd.members`, `cluster up --etcd-members`).
pub const MAX_ETCD_MEMBERS: u32 = 7;

/// Why an etcd of `n` members is refused when `n` is even: it tolerates no more failures than
/// one member fewer.
pub fn even_members_reason(n: u32) -> String {
    format!(
        "{n} members tolerate no more failures than {}, and need more of them for a quorum",
        n - 1
    )
}

/// The process name of replica `i` of a group of `n` (API servers, etcd members): the bare name
/// when there is one, `NAME-i` otherwise.
pub fn member_name(group: &str, i: u32, n: u32) -> String {
    if n <= 1 {
        group.to_owned()
    } else {
        format!("{group}-{i}")
    }
}

/// The process names of a group of `n` (`group` alone for one or none, else `group-0` …).
pub fn member_names(group: &str, n: u32) -> Vec<String> {
    (0..n.max(1)).map(|i| member_name(group, i, n)).collect()
}

impl Cluster {
    /// The API servers' process names.
    pub fn api_server_names(&self) -> Vec<String> {
        member_names("api-server", self.api_servers)
    }

    /// The etcd members' process names.
    pub fn etcd_names(&self) -> Vec<String> {
        member_names("etcd", self.etcd.members)
    }
}

impl Default for Cluster {
    fn default() -> Self {
        Cluster {
            nodes: default_nodes(),
            api_servers: 1,
            etcd: EtcdSpec::default(),
            topology_pos: Pos::default(),
            components: BTreeMap::new(),
            self_hosted: false,
            agents: Vec::new(),
            manifests: Vec::new(),
        }
    }
}

/// A leader-elected control-plane component.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema)]
#[schemars(rename_all = "kebab-case")]
pub enum Component {
    /// kube-scheduler: binds pending pods to nodes.
    KubeScheduler,
    /// kube-controller-manager: Deployments to ReplicaSets to pods, node lifecycle.
    KubeControllerManager,
}

impl Component {
    /// Every component, in a stable order.
    pub const ALL: [Component; 2] = [Component::KubeScheduler, Component::KubeControllerManager];

    /// The upstream name, as in the scenario file.
    pub fn name(self) -> &'static str {
        match self {
            Component::KubeScheduler => "kube-scheduler",
            Component::KubeControllerManager => "kube-controller-manager",
        }
    }

    /// Parse an upstream name.
    pub fn from_name(name: &str) -> Option<Component> {
        Component::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The Lease the component's replicas compete for (upstream defaults).
    pub fn lease(self) -> LeaseRef {
        LeaseRef {
            namespace: "kube-system".into(),
            name: self.name().into(),
        }
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How many replicas of a component.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ComponentSpec {
    /// Number of replicas, each a candidate for the component's Lease.
    #[schemars(range(min = 1, max = 16))]
    pub replicas: u32,
}

/// A group of leader-elected workload replicas.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct AgentSpec {
    /// Group name; targets are `agent/NAME`, `agent/NAME/1`, `agent/NAME/leader`.
    #[schemars(regex(pattern = r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"))]
    pub name: String,
    /// Number of replicas kubechaos starts, each a candidate for the lease (default 1; none for
    /// a pod agent, whose candidates are its pods).
    #[schemars(range(min = 1, max = 16), default = "default_replicas")]
    pub replicas: u32,
    /// The Lease the replicas compete for, `NAMESPACE/NAME`.
    #[schemars(with = "LeaseText")]
    pub lease: LeaseRef,
    /// The reference agent's behaviour when it loses the lease (default `correct`).
    pub mode: Option<AgentMode>,
    /// Your own program instead of the reference agent (local and kube backends).
    pub command: Option<Vec<String>>,
    /// Software already running as pods: its candidates are the pods the selector matches
    /// (a pod agent; local backend: pods of `cluster.manifests`).
    pub pods: Option<PodsRef>,
    /// How the program's log lines say it leads (regular expressions); pod and command agents.
    pub leading: Option<LeadingPatterns>,
    /// How a Lease holder identity names one of a pod agent's pods, where it does not start with
    /// the pod's name: a regular expression whose first capture group (else its whole match) is
    /// the pod's name, like `^leader-(.+)$`.
    pub identity: Option<String>,
    /// Where the entry stands in the file.
    #[schemars(skip)]
    pub pos: Pos,
}

impl AgentSpec {
    /// Whether its candidates are pods (`pods:`), not replicas kubechaos starts.
    pub fn is_pods(&self) -> bool {
        self.pods.is_some()
    }

    /// Its `identity` pattern, compiled (checked when the file was read).
    pub fn identity_pattern(&self) -> Option<regex::Regex> {
        self.identity
            .as_deref()
            .and_then(|p| regex::Regex::new(p).ok())
    }
}

/// Of `pods` (a pod agent's, by name), the one a Lease holder identity names. With a `pattern`,
/// the pod whose name its first capture group (else its whole match) is. Without, the pod whose
/// name the identity is, or starts with followed by a character no pod name ends with (`_`,
/// `-`, `.`, …): client-go and controller-runtime programs write the pod's name or
/// `PODNAME_UUID`. The longest such name, if several.
pub fn holder_pod<'p>(
    pattern: Option<&regex::Regex>,
    identity: &str,
    pods: &'p [String],
) -> Option<&'p String> {
    match pattern {
        Some(re) => {
            let caps = re.captures(identity)?;
            let name = caps.get(1).or_else(|| caps.get(0))?.as_str();
            pods.iter().find(|p| p.as_str() == name)
        }
        None => pods
            .iter()
            .filter(|p| {
                identity
                    .strip_prefix(p.as_str())
                    .is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_alphanumeric()))
            })
            .max_by_key(|p| p.len()),
    }
}

/// The pods of a pod agent.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct PodsRef {
    /// Their namespace.
    #[schemars(regex(pattern = r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"))]
    pub namespace: String,
    /// A label selector, as `kubectl -l` takes it: `app=my-operator`.
    pub selector: String,
}

/// Regular expressions that a program's log lines match when it starts and stops leading.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct LeadingPatterns {
    /// A line saying it now leads (a case-sensitive regular expression): client-go logs `Successfully acquired lease`.
    pub started: String,
    /// A line saying it stopped leading: client-go logs `Failed to renew lease`, controller-runtime then `leader election lost`.
    pub stopped: Option<String>,
}

/// `NAMESPACE/NAME` of a Lease.
#[derive(JsonSchema)]
#[schemars(transparent)]
#[allow(dead_code)]
pub struct LeaseText(#[schemars(regex(pattern = r"^[a-z0-9-]+/[a-z0-9.-]+$"))] String);

/// The reference agent's behaviour when it loses its lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(rename_all = "kebab-case")]
pub enum AgentMode {
    /// Cancels its modules, waits for them, and becomes a candidate again, for as long as it runs.
    Correct,
    /// The elector returns after a failed renew and nothing starts it again (the seed's outcome).
    GiveUp,
    /// Stopping blocks forever on a module, so it never returns to the election (the seed's bug 1).
    StuckOnStop,
}

impl AgentMode {
    /// Name as written in the file.
    pub fn name(self) -> &'static str {
        match self {
            AgentMode::Correct => "correct",
            AgentMode::GiveUp => "give-up",
            AgentMode::StuckOnStop => "stuck-on-stop",
        }
    }
}

/// A Lease, by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeaseRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl fmt::Display for LeaseRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What a fault hits.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    /// The API servers: every one (`api-server`), or one (`api-server/N`).
    ApiServer(Selector),
    /// The etcd members behind them: every one (`etcd`), one (`etcd/N`), or the one leading raft
    /// when the step applies (`etcd/leader`).
    Etcd(Selector),
    /// A component's replicas.
    Component(Component, Selector),
    /// An agent group's replicas.
    Agent(String, Selector),
    /// A node by name.
    Node(String),
}

/// Which replicas of a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Selector {
    /// Every replica.
    All,
    /// Replica N (from 0).
    Index(u32),
    /// The replica that holds the group's Lease when the fault starts.
    Leader,
}

impl Target {
    /// Every API server.
    pub const API_SERVER: Target = Target::ApiServer(Selector::All);
    /// Every etcd member.
    pub const ETCD: Target = Target::Etcd(Selector::All);
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sel = |f: &mut fmt::Formatter<'_>, s: &Selector| match s {
            Selector::All => Ok(()),
            Selector::Index(i) => write!(f, "/{i}"),
            Selector::Leader => write!(f, "/leader"),
        };
        match self {
            Target::ApiServer(s) => {
                f.write_str("api-server")?;
                sel(f, s)
            }
            Target::Etcd(s) => {
                f.write_str("etcd")?;
                sel(f, s)
            }
            Target::Component(c, s) => {
                f.write_str(c.name())?;
                sel(f, s)
            }
            Target::Agent(name, s) => {
                write!(f, "agent/{name}")?;
                sel(f, s)
            }
            Target::Node(name) => write!(f, "node/{name}"),
        }
    }
}

/// A target as written: `api-server[/N]`, `etcd[/N|/leader]`, `kube-scheduler`,
/// `kube-scheduler/1`, `kube-scheduler/leader`, `agent/NAME[/N|/leader]`, `node/NAME`.
#[derive(JsonSchema)]
#[schemars(transparent)]
#[allow(dead_code)]
pub struct TargetText(
    #[schemars(regex(
        pattern = r"^(api-server(/[0-9]+)?|etcd(/([0-9]+|leader))?|(kube-scheduler|kube-controller-manager)(/([0-9]+|leader))?|agent/[a-z0-9-]+(/([0-9]+|leader))?|node/[A-Za-z0-9.-]+)$"
    ))]
    String,
);

/// A value with the position it was written at.
#[derive(Clone, Debug)]
pub struct Located<T> {
    /// The value.
    pub value: T,
    /// Where it was written.
    pub pos: Pos,
}

/// One step of the timeline.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Step {
    /// Offset from the start of the run.
    #[schemars(with = "DurationText")]
    pub at: Duration,
    /// A name that invariants can anchor to with `after:`.
    pub id: Option<String>,
    /// Undo the fault after this long (stop -> start, partition -> heal, remove -> start).
    #[schemars(rename = "for", with = "Option<DurationText>")]
    pub for_: Option<Duration>,
    /// What the step does.
    #[schemars(flatten)]
    pub action: Action,
    /// Where the step starts in the file.
    #[schemars(skip)]
    pub pos: Pos,
    /// Positions of the step's targets, in the order [`Action::targets`] lists them.
    #[schemars(skip)]
    pub target_pos: Vec<Pos>,
}

impl Step {
    /// When the step's effect ends: `at + for`, or `at` for steps without `for`.
    pub fn end(&self) -> Duration {
        self.at + self.for_.unwrap_or_default()
    }
}

/// What a step does. Exactly one per step.
#[derive(Clone, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(rename_all = "kebab-case")]
pub enum Action {
    /// The API server: `stop` (graceful), `start`, `restart`, `crash` (no graceful shutdown).
    ApiServer(ProcessOp),
    /// The datastore behind the API server, with the same operations.
    Etcd(ProcessOp),
    /// No traffic between two targets: `[A, B]` both ways, or `{from: A, to: B}` one way.
    Partition(#[schemars(with = "PartitionText")] Partition),
    /// End every partition: `heal: all`.
    Heal(#[schemars(with = "HealText")] Heal),
    /// The process dies; its supervisor restarts it with back-off.
    Kill(#[schemars(with = "TargetText")] Target),
    /// The process is gone for good until `start`.
    Remove(#[schemars(with = "TargetText")] Target),
    /// Bring back what `remove` took away.
    Start(#[schemars(with = "TargetText")] Target),
    /// Delete matching pods through the API.
    DeletePods(DeletePods),
    /// Disaster recovery: a pod made from the workload's template, pre-bound to a node.
    Recover(Recover),
    /// POST a Binding for a pending pod.
    Bind(Bind),
    /// Traffic on a link arrives late: `{from: A, to: B, latency, jitter}` one way, or
    /// `{between: [A, B], …}` both ways.
    Delay(#[schemars(with = "DelayText")] Delay),
    /// Packets on a link are lost (and retransmitted, as TCP does): `{from: A, to: B, ratio}` one
    /// way, or `{between: [A, B], ratio}` both ways.
    Loss(#[schemars(with = "LossText")] Loss),
    /// The API server answers matching requests with an HTTP error instead of serving them.
    ApiErrors(#[schemars(with = "ApiErrorsText")] ApiErrors),
}

/// What happens to a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(rename_all = "kebab-case")]
pub enum ProcessOp {
    /// Graceful stop.
    Stop,
    /// Start.
    Start,
    /// Stop, then start.
    Restart,
    /// Kill without a graceful shutdown.
    Crash,
}

impl ProcessOp {
    /// As written.
    pub fn name(self) -> &'static str {
        match self {
            ProcessOp::Stop => "stop",
            ProcessOp::Start => "start",
            ProcessOp::Restart => "restart",
            ProcessOp::Crash => "crash",
        }
    }
}

/// A partition between two targets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    /// One side (the sender, when one-way).
    pub a: Target,
    /// The other side (the receiver, when one-way).
    pub b: Target,
    /// Only traffic from `a` to `b` is dropped.
    pub oneway: bool,
    /// A partition that resets: every connection across it is reset (RST) when it starts and
    /// while it lasts, as a rebooted peer answers (`mode: reset`); otherwise packets vanish and
    /// TCP retransmits them until the link heals.
    pub reset: bool,
}

/// A fraction from 0 to 1, kept in millionths (so that actions compare exactly).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ratio(u32);

impl Ratio {
    /// Millionths in a whole.
    pub const WHOLE: u32 = 1_000_000;

    /// The ratio nearest `f` (0 to 1).
    pub fn new(f: f64) -> Ratio {
        Ratio((f.clamp(0.0, 1.0) * f64::from(Self::WHOLE)).round() as u32)
    }

    /// As a fraction.
    pub fn get(self) -> f64 {
        f64::from(self.0) / f64::from(Self::WHOLE)
    }

    /// Every time.
    pub fn is_whole(self) -> bool {
        self.0 >= Self::WHOLE
    }
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.get())
    }
}

/// `delay: {from: A, to: B | between: [A, B], latency: 3s, jitter: 500ms}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delay {
    /// The link, one way or both.
    pub link: Partition,
    /// How much later each message arrives.
    pub latency: Duration,
    /// Each message's delay varies by up to this much either way (uniformly); order is kept.
    pub jitter: Duration,
}

/// `loss: {from: A, to: B | between: [A, B], ratio: 0.3}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loss {
    /// The link, one way or both.
    pub link: Partition,
    /// The share of messages lost (more than 0, less than 1).
    pub ratio: Ratio,
}

/// `api-errors: {status, ratio, retry-after, verbs, resources, namespaces, users}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiErrors {
    /// The HTTP status answered (400 to 599).
    pub status: u16,
    /// The share of matching requests that fail (default 1: every one).
    pub ratio: Ratio,
    /// A `Retry-After` header (whole seconds), as the API server sends with 429.
    pub retry_after: Option<Duration>,
    /// Request verbs (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`); empty: any.
    pub verbs: Vec<String>,
    /// Resources, plural, with a subresource after a `/` (`leases`, `pods/binding`); empty: any.
    pub resources: Vec<String>,
    /// Namespaces; empty: any (and cluster-scoped requests).
    pub namespaces: Vec<String>,
    /// Users as the API server authenticates them (`system:kube-scheduler`); empty: any.
    pub users: Vec<String>,
}

/// The verbs `api-errors` can match, as the API server names requests.
pub const API_VERBS: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

impl ApiErrors {
    /// Whether a request matches (the ratio aside). `resource` may carry a subresource
    /// (`pods/binding`); `namespace` is empty for cluster-scoped requests.
    pub fn matches(&self, verb: &str, resource: &str, namespace: &str, user: &str) -> bool {
        let any = |list: &[String], v: &str| list.is_empty() || list.iter().any(|x| x == v);
        any(&self.verbs, verb)
            && any(&self.resources, resource)
            && any(&self.namespaces, namespace)
            && any(&self.users, user)
    }
}

impl fmt::Display for ApiErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{status: {}, ratio: {}", self.status, self.ratio)?;
        if let Some(r) = self.retry_after {
            write!(f, ", retry-after: {}", super::duration::human(r))?;
        }
        for (key, list) in [
            ("verbs", &self.verbs),
            ("resources", &self.resources),
            ("namespaces", &self.namespaces),
            ("users", &self.users),
        ] {
            if !list.is_empty() {
                write!(f, ", {key}: [{}]", list.join(", "))?;
            }
        }
        f.write_str("}")
    }
}

/// A link as `delay`, `loss` and a mapping `partition` write it: `from: A, to: B` or
/// `between: [A, B]`.
fn link_text(link: &Partition) -> String {
    if link.oneway {
        format!("from: {}, to: {}", link.a, link.b)
    } else {
        format!("between: [{}, {}]", link.a, link.b)
    }
}

/// `delay:` as written.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
pub struct DelayText {
    /// Sender whose messages arrive late (one way; with `to`).
    from: Option<TargetText>,
    /// Receiver (one way; with `from`).
    to: Option<TargetText>,
    /// Both ways between two targets (instead of `from`/`to`).
    #[schemars(length(equal = 2))]
    between: Option<Vec<TargetText>>,
    /// How much later each message arrives (more than 0).
    latency: DurationText,
    /// Up to this much more or less, per message (default 0; at most the latency).
    jitter: Option<DurationText>,
}

/// `loss:` as written.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
pub struct LossText {
    /// Sender whose messages are lost (one way; with `to`).
    from: Option<TargetText>,
    /// Receiver (one way; with `from`).
    to: Option<TargetText>,
    /// Both ways between two targets (instead of `from`/`to`).
    #[schemars(length(equal = 2))]
    between: Option<Vec<TargetText>>,
    /// The share of messages lost: more than 0, less than 1 (a link that loses everything is a
    /// `partition`).
    #[schemars(range(min = 0.0, max = 1.0))]
    ratio: f64,
}

/// `api-errors:` as written.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields, rename_all = "kebab-case")]
#[allow(dead_code)]
pub struct ApiErrorsText {
    /// The HTTP error status answered: 400 to 599 (500, 503, 429, …).
    #[schemars(range(min = 400, max = 599))]
    status: u16,
    /// The share of matching requests that fail: more than 0, at most 1 (default 1).
    #[schemars(range(min = 0.0, max = 1.0))]
    ratio: Option<f64>,
    /// A `Retry-After` header, in whole seconds (as the API server sends with 429).
    retry_after: Option<DurationText>,
    /// Verbs matched: get, list, watch, create, update, patch, delete, deletecollection.
    verbs: Option<Vec<String>>,
    /// Resources matched, plural (`leases`, `pods`, `pods/binding`).
    resources: Option<Vec<String>>,
    /// Namespaces matched.
    namespaces: Option<Vec<String>>,
    /// Users matched, as authenticated (`system:kube-scheduler`).
    users: Option<Vec<String>>,
}

/// `[A, B]`, or a mapping: `{from: A, to: B}` one way, `{between: [A, B]}` both ways, with
/// `mode`.
#[derive(JsonSchema)]
#[schemars(untagged)]
#[allow(dead_code)]
pub enum PartitionText {
    /// Both ways.
    Both(#[schemars(length(equal = 2))] Vec<TargetText>),
    /// One way (`from`, `to`) or both (`between`).
    Link {
        /// Sender whose packets vanish (one way; with `to`).
        from: Option<TargetText>,
        /// Receiver that no longer hears `from` (one way; with `from`).
        to: Option<TargetText>,
        /// Both ways between two targets (instead of `from`/`to`).
        #[schemars(length(equal = 2))]
        between: Option<Vec<TargetText>>,
        /// `hold` (default): packets vanish and are retransmitted until the link heals, so a
        /// connection survives a cut its timeouts outlast; `reset`: every connection across it is
        /// reset, as a rebooted peer answers.
        mode: Option<PartitionMode>,
    },
}

/// How a partition treats the connections across it.
#[derive(JsonSchema)]
#[schemars(rename_all = "kebab-case")]
#[allow(dead_code)]
pub enum PartitionMode {
    /// Packets vanish; TCP retransmits them until the link heals (the default).
    Hold,
    /// Every connection across it is reset (RST), now and while it lasts.
    Reset,
}

/// `heal: all`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heal;

/// The only value of `heal:`.
#[derive(JsonSchema)]
#[allow(dead_code)]
#[schemars(rename_all = "kebab-case")]
pub enum HealText {
    /// Every partition.
    All,
}

/// `delete-pods: {namespace, selector}`.
#[derive(Clone, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct DeletePods {
    /// Namespace of the pods.
    pub namespace: String,
    /// Label selector, `key=value[,key=value]`.
    pub selector: String,
}

/// `recover: {pod-from: NS/KIND/NAME, node: NODE, cleanup: true}`.
#[derive(Clone, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Recover {
    /// The workload whose pod template is used, `NAMESPACE/KIND/NAME`.
    pub pod_from: String,
    /// The node the pod is pre-bound to.
    pub node: String,
    /// Delete the recovery pod once the workload's own pods are Ready again.
    #[schemars(default)]
    pub cleanup: bool,
}

/// `bind: {pod: NS/NAME, node: NODE}`.
#[derive(Clone, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Bind {
    /// The pending pod, `NAMESPACE/NAME`.
    pub pod: String,
    /// The node to bind it to.
    pub node: String,
}

impl Action {
    /// The step's key as written in the file.
    pub fn key(&self) -> &'static str {
        match self {
            Action::ApiServer(_) => "api-server",
            Action::Etcd(_) => "etcd",
            Action::Partition(_) => "partition",
            Action::Heal(_) => "heal",
            Action::Kill(_) => "kill",
            Action::Remove(_) => "remove",
            Action::Start(_) => "start",
            Action::DeletePods(_) => "delete-pods",
            Action::Recover(_) => "recover",
            Action::Bind(_) => "bind",
            Action::Delay(_) => "delay",
            Action::Loss(_) => "loss",
            Action::ApiErrors(_) => "api-errors",
        }
    }

    /// The link a link fault (`partition`, `delay`, `loss`) acts on.
    pub fn link(&self) -> Option<&Partition> {
        match self {
            Action::Partition(p) => Some(p),
            Action::Delay(d) => Some(&d.link),
            Action::Loss(l) => Some(&l.link),
            _ => None,
        }
    }

    /// Whether `for:` can undo the action.
    pub fn undoable(&self) -> bool {
        self.undo().is_some()
            || matches!(
                self,
                Action::Delay(_) | Action::Loss(_) | Action::ApiErrors(_)
            )
    }

    /// Carried out through the API alone (on every cluster), not on the machines.
    pub fn is_api_level(&self) -> bool {
        match self {
            Action::DeletePods(_) | Action::Recover(_) | Action::Bind(_) => true,
            Action::Delay(_) | Action::Loss(_) | Action::ApiErrors(_) => false,
            Action::ApiServer(_)
            | Action::Etcd(_)
            | Action::Partition(_)
            | Action::Heal(_)
            | Action::Kill(_)
            | Action::Remove(_)
            | Action::Start(_) => false,
        }
    }

    /// The node an API-level step puts a pod on (`recover`, `bind`).
    pub fn node(&self) -> Option<&str> {
        match self {
            Action::Recover(r) => Some(&r.node),
            Action::Bind(b) => Some(&b.node),
            Action::ApiServer(_)
            | Action::Etcd(_)
            | Action::Partition(_)
            | Action::Heal(_)
            | Action::Kill(_)
            | Action::Remove(_)
            | Action::Start(_)
            | Action::DeletePods(_)
            | Action::Delay(_)
            | Action::Loss(_)
            | Action::ApiErrors(_) => None,
        }
    }

    /// What undoes the action after its `for:` (stop or crash -> start, partition -> heal,
    /// remove -> start); `None` where `for:` is refused.
    pub fn undo(&self) -> Option<Action> {
        match self {
            Action::ApiServer(ProcessOp::Stop | ProcessOp::Crash) => {
                Some(Action::ApiServer(ProcessOp::Start))
            }
            Action::Etcd(ProcessOp::Stop | ProcessOp::Crash) => {
                Some(Action::Etcd(ProcessOp::Start))
            }
            Action::Partition(_) => Some(Action::Heal(Heal)),
            Action::Remove(t) => Some(Action::Start(t.clone())),
            Action::ApiServer(ProcessOp::Start | ProcessOp::Restart)
            | Action::Etcd(ProcessOp::Start | ProcessOp::Restart)
            | Action::Heal(_)
            | Action::Kill(_)
            | Action::Start(_)
            | Action::DeletePods(_)
            | Action::Recover(_)
            | Action::Bind(_)
            | Action::Delay(_)
            | Action::Loss(_)
            | Action::ApiErrors(_) => None,
        }
    }

    /// What `for:` does at its end, as the timeline and `--dry-run` say it: the undoing action,
    /// and for a partition the healing of that partition alone (`heal: all` would heal every
    /// other partition too, and the driver does not).
    pub fn undo_text(&self) -> Option<String> {
        match self {
            Action::Partition(p) if p.oneway => Some(format!("heal only {} -> {}", p.a, p.b)),
            Action::Partition(p) => Some(format!("heal only [{}, {}]", p.a, p.b)),
            Action::Delay(_) => Some("end only this delay".to_owned()),
            Action::Loss(_) => Some("end only this loss".to_owned()),
            Action::ApiErrors(_) => Some("serve the requests again".to_owned()),
            a => a.undo().map(|u| u.to_string()),
        }
    }

    /// The targets the action names.
    pub fn targets(&self) -> Vec<&Target> {
        match self {
            Action::Partition(p) => vec![&p.a, &p.b],
            Action::Delay(Delay { link: p, .. }) | Action::Loss(Loss { link: p, .. }) => {
                vec![&p.a, &p.b]
            }
            Action::Kill(t) | Action::Remove(t) | Action::Start(t) => vec![t],
            Action::ApiServer(_)
            | Action::Etcd(_)
            | Action::Heal(_)
            | Action::DeletePods(_)
            | Action::Recover(_)
            | Action::Bind(_)
            | Action::ApiErrors(_) => Vec::new(),
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::ApiServer(op) => write!(f, "api-server: {}", op.name()),
            Action::Etcd(op) => write!(f, "etcd: {}", op.name()),
            Action::Partition(p) if p.reset => {
                write!(f, "partition: {{{}, mode: reset}}", link_text(p))
            }
            Action::Partition(p) if p.oneway => {
                write!(f, "partition: {{from: {}, to: {}}}", p.a, p.b)
            }
            Action::Partition(p) => write!(f, "partition: [{}, {}]", p.a, p.b),
            Action::Heal(_) => f.write_str("heal: all"),
            Action::Kill(t) => write!(f, "kill: {t}"),
            Action::Remove(t) => write!(f, "remove: {t}"),
            Action::Start(t) => write!(f, "start: {t}"),
            Action::DeletePods(d) => {
                write!(
                    f,
                    "delete-pods: {{namespace: {}, selector: {}}}",
                    d.namespace, d.selector
                )
            }
            Action::Recover(r) => write!(
                f,
                "recover: {{pod-from: {}, node: {}, cleanup: {}}}",
                r.pod_from, r.node, r.cleanup
            ),
            Action::Bind(b) => write!(f, "bind: {{pod: {}, node: {}}}", b.pod, b.node),
            Action::Delay(d) => {
                write!(
                    f,
                    "delay: {{{}, latency: {}",
                    link_text(&d.link),
                    super::duration::human(d.latency)
                )?;
                if !d.jitter.is_zero() {
                    write!(f, ", jitter: {}", super::duration::human(d.jitter))?;
                }
                f.write_str("}")
            }
            Action::Loss(l) => write!(f, "loss: {{{}, ratio: {}}}", link_text(&l.link), l.ratio),
            Action::ApiErrors(e) => write!(f, "api-errors: {e}"),
        }
    }
}

/// An invariant, judged on the recorded timeline after the run.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(rename_all = "kebab-case")]
pub enum Invariant {
    /// Within D of the anchor, a live candidate holds the Lease and renews it.
    LeaderReacquired(LeaderReacquired),
    /// A probe pod created at the anchor is bound to a node within D.
    Schedulable(Schedulable),
    /// A probe pod created at the anchor stays unbound for at least D.
    Unschedulable(Unschedulable),
    /// Never two candidates acting as leader at once, over the whole run.
    SingleLeader(SingleLeader),
    /// No candidate acts as leader while the Lease does not name it or has expired (beyond a
    /// tolerance), over the whole run: a fencing bug, visible with one replica.
    ValidLeaseWhileLeading(ValidLeaseWhileLeading),
    /// Within D of the anchor the Deployment has all replicas available: its status says so and its Ready pods confirm it.
    Available(Available),
}

/// `leader-reacquired: {lease, within, after}`.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct LeaderReacquired {
    /// `NAMESPACE/NAME` of the Lease.
    #[schemars(with = "LeaseText")]
    pub lease: LeaseRef,
    /// Deadline after the anchor.
    #[schemars(with = "DurationText")]
    pub within: Duration,
    /// Anchor to this step's `id` instead of the end of the last fault.
    pub after: Option<String>,
}

/// `schedulable: {within, after}`.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Schedulable {
    /// Deadline after the anchor.
    #[schemars(with = "DurationText")]
    pub within: Duration,
    /// Anchor to this step's `id` instead of the end of the last fault.
    pub after: Option<String>,
}

/// `unschedulable: {for, after}`.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Unschedulable {
    /// How long the probe pod must stay unbound.
    #[schemars(rename = "for", with = "DurationText")]
    pub for_: Duration,
    /// Anchor to this step's `id` instead of the end of the last fault.
    pub after: Option<String>,
}

/// `single-leader: {lease}`.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SingleLeader {
    /// `NAMESPACE/NAME` of the Lease.
    #[schemars(with = "LeaseText")]
    pub lease: LeaseRef,
    /// How many leadership terms must be observed for the invariant to be judged at all
    /// (default 1): with fewer there is no evidence, and the invariant has not held. `0` says
    /// that no candidate is expected to say it leads.
    #[schemars(rename = "min-terms", with = "Option<u32>")]
    pub min_terms: u32,
}

/// What `after: STEP-ID.end` adds to a step's id: the anchor is the moment its `for:` undid it
/// (the API server started again, the partition healed), not the moment it was applied.
pub const END_SUFFIX: &str = ".end";

/// `min-terms` when an invariant does not say: one leadership term at least, or nothing was
/// judged.
pub const DEFAULT_MIN_TERMS: u32 = 1;

/// `valid-lease-while-leading: {lease, tolerance}`.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ValidLeaseWhileLeading {
    /// `NAMESPACE/NAME` of the Lease.
    #[schemars(with = "LeaseText")]
    pub lease: LeaseRef,
    /// How long a leader may go on after its Lease stopped naming it or expired by its own
    /// `renewTime` + `leaseDurationSeconds` (the observer's lag, clock skew); default 2s.
    #[schemars(with = "Option<DurationText>")]
    pub tolerance: Duration,
    /// As `single-leader`'s: how many leadership terms must be observed to judge (default 1).
    #[schemars(rename = "min-terms", with = "Option<u32>")]
    pub min_terms: u32,
}

/// `available: {deployment, within, after}`.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Available {
    /// `NAMESPACE/NAME` of the Deployment.
    pub deployment: String,
    /// Deadline after the anchor.
    #[schemars(with = "DurationText")]
    pub within: Duration,
    /// Anchor to this step's `id` instead of the end of the last fault.
    pub after: Option<String>,
}

impl<T: JsonSchema> JsonSchema for Located<T> {
    fn inline_schema() -> bool {
        T::inline_schema()
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }
    fn schema_id() -> std::borrow::Cow<'static, str> {
        T::schema_id()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

impl Invariant {
    /// The key as written.
    pub fn key(&self) -> &'static str {
        match self {
            Invariant::LeaderReacquired(_) => "leader-reacquired",
            Invariant::Schedulable(_) => "schedulable",
            Invariant::Unschedulable(_) => "unschedulable",
            Invariant::SingleLeader(_) => "single-leader",
            Invariant::ValidLeaseWhileLeading(_) => "valid-lease-while-leading",
            Invariant::Available(_) => "available",
        }
    }

    /// The `after:` step id, if any.
    /// The step its `after:` names (`STEP-ID`, or `STEP-ID.end` for the moment the step's
    /// `for:` undid it), and whether it is the step's end.
    pub fn after_step(&self) -> Option<(&str, bool)> {
        self.after().map(|a| match a.strip_suffix(END_SUFFIX) {
            Some(id) => (id, true),
            None => (a, false),
        })
    }

    /// `after:` as written.
    pub fn after(&self) -> Option<&str> {
        match self {
            Invariant::LeaderReacquired(i) => i.after.as_deref(),
            Invariant::Schedulable(i) => i.after.as_deref(),
            Invariant::Unschedulable(i) => i.after.as_deref(),
            Invariant::SingleLeader(_) | Invariant::ValidLeaseWhileLeading(_) => None,
            Invariant::Available(i) => i.after.as_deref(),
        }
    }

    /// Whether the invariant needs a probe pod, created at its anchor.
    pub fn probes(&self) -> bool {
        match self {
            Invariant::Schedulable(_) | Invariant::Unschedulable(_) => true,
            Invariant::LeaderReacquired(_)
            | Invariant::SingleLeader(_)
            | Invariant::ValidLeaseWhileLeading(_)
            | Invariant::Available(_) => false,
        }
    }

    /// How long after its anchor the invariant needs to be watched.
    pub fn window(&self) -> Duration {
        match self {
            Invariant::LeaderReacquired(i) => i.within,
            Invariant::Schedulable(i) => i.within,
            Invariant::Unschedulable(i) => i.for_,
            Invariant::SingleLeader(_) | Invariant::ValidLeaseWhileLeading(_) => Duration::ZERO,
            Invariant::Available(i) => i.within,
        }
    }

    /// A one-line label: `leader-reacquired kube-system/kube-scheduler`.
    pub fn label(&self) -> String {
        match self {
            Invariant::LeaderReacquired(i) => format!("leader-reacquired {}", i.lease),
            Invariant::Schedulable(_) => "schedulable".into(),
            Invariant::Unschedulable(_) => "unschedulable".into(),
            Invariant::SingleLeader(i) => format!("single-leader {}", i.lease),
            Invariant::ValidLeaseWhileLeading(i) => {
                format!("valid-lease-while-leading {}", i.lease)
            }
            Invariant::Available(i) => format!("available {}", i.deployment),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pods(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    /// Without a pattern, a holder names the pod it is or starts with, up to a character no
    /// name ends with; a pod whose name is only a prefix of another's word is not named.
    #[test]
    fn a_holder_names_the_pod_it_starts_with_up_to_a_separator() {
        let p = pods(&["op-7d9f-abcd", "op-7d9f-abcde", "op"]);
        assert_eq!(holder_pod(None, "op-7d9f-abcde", &p), Some(&p[1]));
        assert_eq!(holder_pod(None, "op-7d9f-abcde_5f3a", &p), Some(&p[1]));
        assert_eq!(holder_pod(None, "op-7d9f-abcd_1", &p), Some(&p[0]));
        // `op` is a prefix of every identity, but the longest pod that is named wins.
        assert_eq!(holder_pod(None, "op-7d9f-abcde.node-1", &p), Some(&p[1]));
        assert_eq!(holder_pod(None, "op_x", &p), Some(&p[2]));
        assert_eq!(holder_pod(None, "opx_1", &p), None);
        assert_eq!(holder_pod(None, "node-1", &p), None);
    }

    /// With a pattern, its first group (else its whole match) is the pod's name, and it must be
    /// one of the pods.
    #[test]
    fn a_pattern_captures_the_pods_name_from_a_holder() {
        let p = pods(&["op-1", "op-2"]);
        let group = regex::Regex::new(r"^node-\d+/(.+)$").unwrap();
        assert_eq!(holder_pod(Some(&group), "node-3/op-2", &p), Some(&p[1]));
        assert_eq!(holder_pod(Some(&group), "op-2", &p), None);
        assert_eq!(holder_pod(Some(&group), "node-3/op-9", &p), None);
        let whole = regex::Regex::new(r"op-\d").unwrap();
        assert_eq!(
            holder_pod(Some(&whole), "lock-op-1-holder", &p),
            Some(&p[0])
        );
    }
}

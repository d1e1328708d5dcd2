//! From a YAML node tree to the typed [`Scenario`], collecting every problem with its position.

use crate::error::SyntaxError;
use std::collections::BTreeMap;
use std::time::Duration;

use super::duration;
use super::model::*;
use super::yaml::{Node, Pos, Value};

/// Keys of the top-level mapping.
pub const SCENARIO_KEYS: &[&str] = &[
    "name",
    "description",
    "cluster",
    "faults",
    "expect",
    "duration",
    "sim",
];
/// Keys of `cluster:`.
pub(crate) const CLUSTER_KEYS: &[&str] = &[
    "nodes",
    "api-servers",
    "etcd",
    "components",
    "self-hosted",
    "agents",
    "manifests",
];
/// Keys of an agent group.
pub(crate) const AGENT_KEYS: &[&str] = &[
    "name", "replicas", "lease", "mode", "command", "pods", "leading", "identity",
];
/// Keys of a step besides its action.
pub(crate) const STEP_KEYS: &[&str] = &["at", "id", "for"];
/// The action keys of a step.
pub(crate) const ACTION_KEYS: &[&str] = &[
    "api-server",
    "etcd",
    "partition",
    "heal",
    "kill",
    "remove",
    "start",
    "delete-pods",
    "recover",
    "bind",
    "delay",
    "loss",
    "api-errors",
];
/// Invariant keys.
pub(crate) const INVARIANT_KEYS: &[&str] = &[
    "leader-reacquired",
    "schedulable",
    "unschedulable",
    "single-leader",
    "valid-lease-while-leading",
    "available",
];

/// A problem found while decoding: where, and a sentence that says what is wrong and what was
/// expected.
pub(crate) type Problem = (Pos, String);

/// Decode a document. Returns the scenario when there were no problems.
pub(crate) fn decode(root: &Node) -> Result<Scenario, Vec<Problem>> {
    let mut d = Decoder::default();
    let scenario = d.scenario(root);
    if d.problems.is_empty() {
        Ok(scenario.expect("a scenario when there are no problems"))
    } else {
        Err(d.problems)
    }
}

#[derive(Default)]
struct Decoder {
    problems: Vec<Problem>,
}

/// The entries of a mapping, after unknown and duplicate keys were reported.
struct Fields<'a> {
    entries: BTreeMap<&'a str, (&'a Node, &'a Node)>,
}

impl<'a> Fields<'a> {
    fn get(&self, key: &str) -> Option<&'a Node> {
        self.entries.get(key).map(|(_, v)| *v)
    }
    fn key_pos(&self, key: &str) -> Option<Pos> {
        self.entries.get(key).map(|(k, _)| k.pos)
    }
}

/// Names as a message lists them: `` `a`, `b`, `c` ``.
pub(crate) fn ticked<T: std::fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    items
        .into_iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The closest allowed word, if it is close enough to be a typo.
pub(crate) fn suggest<'a>(word: &str, allowed: &[&'a str]) -> Option<&'a str> {
    fn distance(a: &str, b: &str) -> usize {
        let b: Vec<char> = b.chars().collect();
        let mut prev: Vec<usize> = (0..=b.len()).collect();
        for (i, ca) in a.chars().enumerate() {
            let mut cur = vec![i + 1];
            for (j, cb) in b.iter().enumerate() {
                let cost = usize::from(ca != *cb);
                cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
            }
            prev = cur;
        }
        prev[b.len()]
    }
    allowed
        .iter()
        .map(|a| (distance(word, a), *a))
        .filter(|(d, a)| *d <= 2.max(a.len() / 4) && *d < a.len())
        .min()
        .map(|(_, a)| a)
}

impl Decoder {
    fn problem(&mut self, pos: Pos, message: impl Into<String>) {
        self.problems.push((pos, message.into()));
    }

    fn fields<'a>(&mut self, node: &'a Node, what: &str, allowed: &[&str]) -> Option<Fields<'a>> {
        let Value::Map(entries) = &node.value else {
            self.problem(
                node.pos,
                format!(
                    "{what} is {}; expected a mapping with keys {}",
                    node.value.kind(),
                    ticked(allowed)
                ),
            );
            return None;
        };
        let mut fields = Fields {
            entries: BTreeMap::new(),
        };
        for (k, v) in entries {
            let Value::Str(key) = &k.value else {
                self.problem(
                    k.pos,
                    format!(
                        "a key in {what} is {}; expected one of {}",
                        k.value.kind(),
                        ticked(allowed)
                    ),
                );
                continue;
            };
            if !allowed.contains(&key.as_str()) {
                let hint = suggest(key, allowed)
                    .map(|s| format!(" (did you mean `{s}`?)"))
                    .unwrap_or_default();
                self.problem(
                    k.pos,
                    format!(
                        "unknown key `{key}` in {what}{hint}; expected one of {}",
                        ticked(allowed)
                    ),
                );
                continue;
            }
            if fields.entries.contains_key(key.as_str()) {
                self.problem(
                    k.pos,
                    format!("`{key}` is given twice in {what}; expected each key once"),
                );
                continue;
            }
            fields.entries.insert(key.as_str(), (k, v));
        }
        Some(fields)
    }

    fn required<'a>(
        &mut self,
        fields: &Fields<'a>,
        at: Pos,
        key: &str,
        what: &str,
    ) -> Option<&'a Node> {
        let node = fields.get(key);
        if node.is_none() {
            self.problem(at, format!("{what} has no `{key}`; expected `{key}:`"));
        }
        node
    }

    fn string(&mut self, node: &Node, what: &str) -> Option<String> {
        match &node.value {
            Value::Str(s) => Some(s.clone()),
            other => {
                self.problem(
                    node.pos,
                    format!("{what} is {}; expected a string", other.kind()),
                );
                None
            }
        }
    }

    fn boolean(&mut self, node: &Node, what: &str) -> Option<bool> {
        match &node.value {
            Value::Bool(b) => Some(*b),
            other => {
                self.problem(
                    node.pos,
                    format!("{what} is {}; expected true or false", other.kind()),
                );
                None
            }
        }
    }

    /// An invariant's `min-terms` (default [`DEFAULT_MIN_TERMS`]).
    fn min_terms(&mut self, g: &Fields<'_>, invariant: &str) -> Option<u32> {
        match g.get("min-terms") {
            Some(n) => self.count(n, &format!("`{invariant}.min-terms`"), 0, 1000),
            None => Some(DEFAULT_MIN_TERMS),
        }
    }

    fn count(&mut self, node: &Node, what: &str, min: i64, max: i64) -> Option<u32> {
        match &node.value {
            Value::Int(n) if (min..=max).contains(n) => Some(*n as u32),
            Value::Int(n) => {
                self.problem(
                    node.pos,
                    format!("{what} is {n}; expected a whole number from {min} to {max}"),
                );
                None
            }
            other => {
                self.problem(
                    node.pos,
                    format!(
                        "{what} is {}; expected a whole number from {min} to {max}",
                        other.kind()
                    ),
                );
                None
            }
        }
    }

    fn duration(&mut self, node: &Node, what: &str) -> Option<Duration> {
        match &node.value {
            Value::Str(s) => match duration::parse(s) {
                Ok(d) => Some(d),
                Err(e) => {
                    self.problem(
                        node.pos,
                        format!(
                            "{what}: {e}; expected a duration like 500ms, 20s, 2m, 1m30s or 1h"
                        ),
                    );
                    None
                }
            },
            Value::Int(n) => {
                self.problem(
                    node.pos,
                    format!("{what} is the number {n} without a unit; expected a duration like `{n}s` or `{n}ms`"),
                );
                None
            }
            other => {
                self.problem(
                    node.pos,
                    format!(
                        "{what} is {}; expected a duration like 500ms, 20s, 2m, 1m30s or 1h",
                        other.kind()
                    ),
                );
                None
            }
        }
    }

    fn lease(&mut self, node: &Node, what: &str) -> Option<LeaseRef> {
        let text = self.string(node, what)?;
        match parse_namespaced(&text) {
            Some((namespace, name)) => Some(LeaseRef { namespace, name }),
            None => {
                self.problem(node.pos, format!("{what} `{text}` is not NAMESPACE/NAME; expected for example `kube-system/kube-scheduler`"));
                None
            }
        }
    }

    fn target(&mut self, node: &Node, what: &str) -> Option<Target> {
        let text = self.string(node, what)?;
        match parse_target(&text) {
            Ok(t) => Some(t),
            Err(e) => {
                self.problem(node.pos, format!("{what}: {e}"));
                None
            }
        }
    }

    fn scenario(&mut self, root: &Node) -> Option<Scenario> {
        let f = self.fields(root, "the scenario", SCENARIO_KEYS)?;
        let name_node = self.required(&f, root.pos, "name", "the scenario");
        let name = name_node.and_then(|n| self.string(n, "`name`"));
        if let (Some(n), Some(node)) = (&name, name_node) {
            if !is_dns_label(n) {
                self.problem(node.pos, format!("name `{n}` is not a valid name; expected lower-case letters, digits and `-`, like `api-restart`"));
            }
        }
        let description = f
            .get("description")
            .and_then(|n| self.string(n, "`description`"))
            .unwrap_or_default();
        let cluster = match f.get("cluster") {
            Some(n) => self.cluster(n),
            None => Some(Cluster::default()),
        };
        let mut faults = Some(Vec::new());
        if let Some(n) = f.get("faults") {
            match &n.value {
                Value::Seq(items) => {
                    for item in items {
                        let step = self.step(item);
                        match (&mut faults, step) {
                            (Some(list), Some(s)) => list.push(s),
                            _ => faults = None,
                        }
                    }
                }
                Value::Null => {}
                other => {
                    self.problem(n.pos, format!("`faults` is {}; expected a list of steps like `- {{at: 20s, api-server: stop}}`", other.kind()));
                    faults = None;
                }
            }
        }
        let mut expect = Some(Vec::new());
        if let Some(n) = f.get("expect") {
            match &n.value {
                Value::Seq(items) => {
                    for item in items {
                        let inv = self.invariant(item);
                        match (&mut expect, inv) {
                            (Some(list), Some(i)) => list.push(Located {
                                value: i,
                                pos: item.pos,
                            }),
                            _ => expect = None,
                        }
                    }
                }
                Value::Null => {}
                other => {
                    self.problem(n.pos, format!("`expect` is {}; expected a list of invariants like `- schedulable: {{within: 60s}}`", other.kind()));
                    expect = None;
                }
            }
        }
        let duration = match f.get("duration") {
            Some(n) => Some(self.duration(n, "`duration`")?),
            None => None,
        };
        let sim = match f.get("sim") {
            None => SimSettings::default(),
            Some(n) => {
                let sf = self.fields(n, "`sim`", &["seed", "step"])?;
                let seed = match sf.get("seed") {
                    Some(v) => match &v.value {
                        Value::Int(i) if *i >= 0 => Some(*i as u64),
                        other => {
                            self.problem(
                                v.pos,
                                format!(
                                    "`sim.seed` is {}; expected a whole number of 0 or more",
                                    other.kind()
                                ),
                            );
                            return None;
                        }
                    },
                    None => None,
                };
                let step = match sf.get("step") {
                    Some(v) => {
                        let d = self.positive(v, "`sim.step`")?;
                        if d.subsec_nanos() % 1_000_000 != 0 || d > Duration::from_secs(1) {
                            self.problem(v.pos, format!("`sim.step` is {}; expected whole milliseconds from 1ms to 1s, like 10ms (the default) or 100ms", duration::human(d)));
                            return None;
                        }
                        Some(d)
                    }
                    None => None,
                };
                SimSettings { seed, step }
            }
        };
        Some(Scenario {
            name: name?,
            description,
            cluster: cluster?,
            faults: faults?,
            expect: expect?,
            duration,
            sim,
            source: Source {
                path: Default::default(),
                duration_pos: f.key_pos("duration").unwrap_or_default(),
                name_pos: name_node.map(|n| n.pos).unwrap_or_default(),
            },
        })
    }

    fn cluster(&mut self, node: &Node) -> Option<Cluster> {
        let f = self.fields(node, "`cluster`", CLUSTER_KEYS)?;
        let mut ok = true;
        let nodes = match f.get("nodes") {
            Some(n) => self.count(n, "`cluster.nodes`", 0, 100),
            None => Some(3),
        };
        let api_servers = match f.get("api-servers") {
            Some(n) => self.count(n, "`cluster.api-servers`", 1, MAX_API_SERVERS.into()),
            None => Some(1),
        };
        let etcd_members = match f.get("etcd") {
            None => Some(1),
            Some(n) => self.fields(n, "`cluster.etcd`", &["members"]).and_then(|ef| {
                let members = match ef.get("members") {
                    Some(m) => self.count(m, "`cluster.etcd.members`", 1, MAX_ETCD_MEMBERS.into()),
                    None => Some(1),
                };
                match (members, ef.get("members")) {
                    (Some(m), Some(node)) if m % 2 == 0 => {
                        self.problem(node.pos, format!("`cluster.etcd.members` is {m}; expected an odd number (1, 3, 5 or 7): {}", even_members_reason(m)));
                        None
                    }
                    (m, _) => m,
                }
            }),
        };
        let mut components = BTreeMap::new();
        if let Some(n) = f.get("components") {
            let names: Vec<&str> = Component::ALL.iter().map(|c| c.name()).collect();
            if let Some(cf) = self.fields(n, "`cluster.components`", &names) {
                for c in Component::ALL {
                    if let Some(spec) = cf.get(c.name()) {
                        let what = format!("`{}`", c.name());
                        match self.fields(spec, &what, &["replicas"]) {
                            Some(sf) => {
                                let replicas = self
                                    .required(&sf, spec.pos, "replicas", &what)
                                    .and_then(|r| {
                                        self.count(r, &format!("`{}.replicas`", c.name()), 1, 16)
                                    });
                                match replicas {
                                    Some(replicas) => {
                                        components.insert(c, ComponentSpec { replicas });
                                    }
                                    None => ok = false,
                                }
                            }
                            None => ok = false,
                        }
                    }
                }
            } else {
                ok = false;
            }
        }
        let self_hosted = match f.get("self-hosted") {
            Some(n) => self.boolean(n, "`cluster.self-hosted`"),
            None => Some(false),
        };
        let mut agents = Vec::new();
        if let Some(n) = f.get("agents") {
            match &n.value {
                Value::Seq(items) => {
                    for item in items {
                        match self.agent(item) {
                            Some(a) => agents.push(a),
                            None => ok = false,
                        }
                    }
                }
                Value::Null => {}
                other => {
                    self.problem(n.pos, format!("`cluster.agents` is {}; expected a list like `- {{name: agent, replicas: 2, lease: default/agent-lock}}`", other.kind()));
                    ok = false;
                }
            }
        }
        let mut manifests = Vec::new();
        if let Some(n) = f.get("manifests") {
            match &n.value {
                Value::Seq(items) => {
                    for item in items {
                        match &item.value {
                            Value::Str(path) if !path.trim().is_empty() => {
                                manifests.push(Manifest {
                                    written: path.clone(),
                                    file: std::path::PathBuf::from(path),
                                    objects: Vec::new(),
                                    pos: item.pos,
                                })
                            }
                            other => {
                                self.problem(item.pos, format!("an entry of `cluster.manifests` is {}; expected the path of a YAML manifest, relative to the scenario file", if matches!(other, Value::Str(_)) { "empty" } else { other.kind() }));
                                ok = false;
                            }
                        }
                    }
                }
                Value::Null => {}
                other => {
                    self.problem(n.pos, format!("`cluster.manifests` is {}; expected a list of files like `[my-operator.yaml]`, relative to the scenario file", other.kind()));
                    ok = false;
                }
            }
        }
        if !ok {
            return None;
        }
        Some(Cluster {
            nodes: nodes?,
            api_servers: api_servers?,
            etcd: EtcdSpec {
                members: etcd_members?,
            },
            topology_pos: f
                .key_pos("api-servers")
                .or_else(|| f.key_pos("etcd"))
                .unwrap_or(node.pos),
            components,
            self_hosted: self_hosted?,
            agents,
            manifests,
        })
    }

    fn agent(&mut self, node: &Node) -> Option<AgentSpec> {
        let f = self.fields(node, "an agent", AGENT_KEYS)?;
        let name = self
            .required(&f, node.pos, "name", "an agent")
            .and_then(|n| self.string(n, "`agent.name`"));
        if let Some(n) = &name {
            if !is_dns_label(n) {
                self.problem(f.get("name").map(|n| n.pos).unwrap_or(node.pos), format!("agent name `{n}` is not a valid name; expected lower-case letters, digits and `-`"));
            }
        }
        let replicas = match f.get("replicas") {
            Some(n) => self.count(n, "`agent.replicas`", 1, 16),
            None => Some(1),
        };
        let lease = self
            .required(&f, node.pos, "lease", "an agent")
            .and_then(|n| self.lease(n, "`agent.lease`"));
        let mut ok = true;
        let mode = match f.get("mode") {
            Some(n) => match self.string(n, "`agent.mode`").as_deref() {
                Some("correct") => Some(AgentMode::Correct),
                Some("give-up") => Some(AgentMode::GiveUp),
                Some("stuck-on-stop") => Some(AgentMode::StuckOnStop),
                Some(other) => {
                    self.problem(n.pos, format!("agent mode `{other}` is unknown; expected `correct`, `give-up` or `stuck-on-stop`"));
                    ok = false;
                    None
                }
                None => {
                    ok = false;
                    None
                }
            },
            None => None,
        };
        let command = match f.get("command") {
            Some(n) => {
                match &n.value {
                    Value::Seq(items) if !items.is_empty() => {
                        let mut argv = Vec::new();
                        for item in items {
                            match &item.value {
                                Value::Str(s) => argv.push(s.clone()),
                                Value::Int(i) => argv.push(i.to_string()),
                                other => {
                                    self.problem(item.pos, format!("an argument of `agent.command` is {}; expected a string", other.kind()));
                                    ok = false;
                                }
                            }
                        }
                        Some(argv)
                    }
                    other => {
                        self.problem(n.pos, format!("`agent.command` is {}; expected a non-empty list like `[./my-controller, --lease, default/my-lock]`", other.kind()));
                        ok = false;
                        None
                    }
                }
            }
            None => None,
        };
        if mode.is_some() && command.is_some() {
            self.problem(node.pos, "an agent has both `mode` and `command`; expected one: `mode` runs the reference agent, `command` runs your own program");
            ok = false;
        }
        let pods = match f.get("pods") {
            Some(n) => {
                let p = self.pods(n);
                ok &= p.is_some();
                p
            }
            None => None,
        };
        if pods.is_some() {
            for key in ["replicas", "mode", "command"] {
                if let Some(pos) = f.key_pos(key) {
                    self.problem(pos, format!("a pod agent (`pods`) has `{key}`; expected none: its candidates are the pods its selector matches, running what their manifests say"));
                    ok = false;
                }
            }
        }
        let leading = match f.get("leading") {
            Some(n) => {
                let l = self.leading(n);
                ok &= l.is_some();
                if pods.is_none() && command.is_none() {
                    self.problem(n.pos, "`leading` on the reference agent; expected it only with `pods` or `command`: the reference agent reports its leadership itself");
                    ok = false;
                }
                l
            }
            None => None,
        };
        let identity = match f.get("identity") {
            Some(n) => {
                let i = self.identity(n);
                ok &= i.is_some();
                if pods.is_none() {
                    self.problem(n.pos, "`identity` on an agent without `pods`; expected it only on a pod agent: the agents kubechaos starts are given their identities");
                    ok = false;
                }
                i
            }
            None => None,
        };
        if !ok {
            return None;
        }
        Some(AgentSpec {
            name: name?,
            replicas: if pods.is_some() { 0 } else { replicas? },
            lease: lease?,
            mode,
            command,
            pods,
            leading,
            identity,
            pos: node.pos,
        })
    }

    /// `identity: REGEX`: how a Lease holder identity names a pod agent's pod.
    fn identity(&mut self, node: &Node) -> Option<String> {
        let text = self.string(node, "`agent.identity`")?;
        let expected = "expected a regular expression whose first group captures the pod's name from a Lease holder identity, like `^leader-(.+)$`";
        match regex::Regex::new(&text) {
            Ok(_) if text.is_empty() => {
                self.problem(node.pos, format!("`agent.identity` is empty; {expected}"));
                None
            }
            Ok(_) => Some(text),
            Err(e) => {
                let why = e.to_string();
                let why = why.lines().last().unwrap_or("").trim().to_owned();
                self.problem(
                    node.pos,
                    format!("`agent.identity` is not a regular expression ({why}); {expected}"),
                );
                None
            }
        }
    }

    /// `pods: {namespace: NS, selector: LABELS}` of a pod agent.
    fn pods(&mut self, node: &Node) -> Option<PodsRef> {
        let what = "`agent.pods`";
        let f = self.fields(node, what, &["namespace", "selector"])?;
        let namespace = self
            .required(&f, node.pos, "namespace", what)
            .and_then(|n| self.string(n, "`agent.pods.namespace`"));
        if let Some(ns) = &namespace {
            if !is_dns_label(ns) {
                self.problem(f.get("namespace").map(|n| n.pos).unwrap_or(node.pos), format!("`{ns}` is not a namespace name; expected lower-case letters, digits and `-`"));
                return None;
            }
        }
        let selector = self
            .required(&f, node.pos, "selector", what)
            .and_then(|n| self.string(n, "`agent.pods.selector`"));
        if let Some(sel) = &selector {
            let pos = f.get("selector").map(|n| n.pos).unwrap_or(node.pos);
            if sel.trim().is_empty() {
                self.problem(pos, "`agent.pods.selector` is empty; expected a label selector that picks the agent's pods, like `app=my-operator`");
                return None;
            }
            if let Err(e) = crate::selector::parse(sel) {
                self.problem(pos, format!("`agent.pods.selector`: {e}; expected a label selector like `app=my-operator` or `app=x,tier!=web`"));
                return None;
            }
        }
        Some(PodsRef {
            namespace: namespace?,
            selector: selector?,
        })
    }

    /// `leading: {started: REGEX, stopped: REGEX}`.
    fn leading(&mut self, node: &Node) -> Option<LeadingPatterns> {
        let what = "`agent.leading`";
        let f = self.fields(node, what, &["started", "stopped"])?;
        let pattern = |d: &mut Self, key: &str| -> Option<Option<String>> {
            let Some(n) = f.get(key) else {
                return Some(None);
            };
            let text = d.string(n, &format!("`agent.leading.{key}`"))?;
            match regex::Regex::new(&text) {
                Ok(_) if text.is_empty() => {
                    d.problem(n.pos, format!("`agent.leading.{key}` is empty; expected a regular expression that its log lines match, like `Successfully acquired lease` (client-go's line)"));
                    None
                }
                Ok(_) => Some(Some(text)),
                Err(e) => {
                    let why = e.to_string();
                    let why = why.lines().last().unwrap_or("").trim().to_owned();
                    d.problem(n.pos, format!("`agent.leading.{key}` is not a regular expression ({why}); expected one that its log lines match, like `Successfully acquired lease` (client-go's line)"));
                    None
                }
            }
        };
        let started = pattern(self, "started");
        let stopped = pattern(self, "stopped");
        let started = match started? {
            Some(s) => s,
            None => {
                self.problem(node.pos, "`agent.leading` has no `started`; expected `started: REGEX` (and optionally `stopped: REGEX`)");
                return None;
            }
        };
        Some(LeadingPatterns {
            started,
            stopped: stopped?,
        })
    }

    fn step(&mut self, node: &Node) -> Option<Step> {
        let mut allowed: Vec<&str> = STEP_KEYS.to_vec();
        allowed.extend_from_slice(ACTION_KEYS);
        let f = self.fields(node, "a fault step", &allowed)?;
        let at = self
            .required(&f, node.pos, "at", "a fault step")
            .and_then(|n| self.duration(n, "`at`"));
        let id = match f.get("id") {
            Some(n) => {
                let id = self.string(n, "`id`");
                if let Some(i) = &id {
                    if !is_dns_label(i) {
                        self.problem(n.pos, format!("step id `{i}` is not a valid id; expected lower-case letters, digits and `-`"));
                    }
                }
                Some(id?)
            }
            None => None,
        };
        let for_ = match f.get("for") {
            Some(n) => Some(self.duration(n, "`for`")?),
            None => None,
        };
        let actions: Vec<&str> = ACTION_KEYS
            .iter()
            .copied()
            .filter(|k| f.get(k).is_some())
            .collect();
        let key = match actions.as_slice() {
            [one] => *one,
            [] => {
                self.problem(
                    node.pos,
                    format!(
                        "a fault step has no action; expected one of {}",
                        ticked(ACTION_KEYS)
                    ),
                );
                return None;
            }
            many => {
                self.problem(
                    node.pos,
                    format!(
                        "a fault step has {} actions ({}); expected exactly one per step",
                        many.len(),
                        ticked(many)
                    ),
                );
                return None;
            }
        };
        let value = f.get(key).expect("present");
        let mut target_pos = Vec::new();
        let action = match key {
            "api-server" | "etcd" => {
                let op = match self.string(value, &format!("`{key}`"))?.as_str() {
                    "stop" => ProcessOp::Stop,
                    "start" => ProcessOp::Start,
                    "restart" => ProcessOp::Restart,
                    "crash" => ProcessOp::Crash,
                    other => {
                        self.problem(value.pos, format!("`{key}: {other}` is unknown; expected `stop`, `start`, `restart` or `crash`"));
                        return None;
                    }
                };
                if key == "api-server" {
                    Action::ApiServer(op)
                } else {
                    Action::Etcd(op)
                }
            }
            "partition" => Action::Partition(self.partition(value, &mut target_pos)?),
            "heal" => match &value.value {
                Value::Str(s) if s == "all" => Action::Heal(Heal),
                other => {
                    self.problem(
                        value.pos,
                        format!("`heal` is {}; expected `heal: all`", other.kind()),
                    );
                    return None;
                }
            },
            "kill" | "remove" | "start" => {
                let t = self.target(value, &format!("`{key}`"))?;
                target_pos.push(value.pos);
                match key {
                    "kill" => Action::Kill(t),
                    "remove" => Action::Remove(t),
                    _ => Action::Start(t),
                }
            }
            "delete-pods" => {
                let df = self.fields(value, "`delete-pods`", &["namespace", "selector"])?;
                let ns = self
                    .required(&df, value.pos, "namespace", "`delete-pods`")
                    .and_then(|n| self.string(n, "`delete-pods.namespace`"));
                let sel = self
                    .required(&df, value.pos, "selector", "`delete-pods`")
                    .and_then(|n| self.string(n, "`delete-pods.selector`"));
                if let (Some(s), Some(n)) = (&sel, df.get("selector")) {
                    if let Err(e) = crate::selector::parse(s) {
                        self.problem(n.pos, format!("`delete-pods.selector`: {e}; expected a label selector like `component=kube-scheduler`"));
                        return None;
                    }
                }
                Action::DeletePods(DeletePods {
                    namespace: ns?,
                    selector: sel?,
                })
            }
            "recover" => {
                let rf = self.fields(value, "`recover`", &["pod-from", "node", "cleanup"])?;
                let from = self
                    .required(&rf, value.pos, "pod-from", "`recover`")
                    .and_then(|n| self.string(n, "`recover.pod-from`"));
                if let (Some(s), Some(n)) = (&from, rf.get("pod-from")) {
                    if s.split('/').count() != 3 || s.split('/').any(str::is_empty) {
                        self.problem(n.pos, format!("`recover.pod-from` `{s}` is not NAMESPACE/KIND/NAME; expected for example `kube-system/deployment/kube-scheduler`"));
                        return None;
                    }
                }
                let node_name = self
                    .required(&rf, value.pos, "node", "`recover`")
                    .and_then(|n| self.string(n, "`recover.node`"));
                let cleanup = match rf.get("cleanup") {
                    Some(n) => self.boolean(n, "`recover.cleanup`"),
                    None => Some(false),
                };
                Action::Recover(Recover {
                    pod_from: from?,
                    node: node_name?,
                    cleanup: cleanup?,
                })
            }
            "bind" => {
                let bf = self.fields(value, "`bind`", &["pod", "node"])?;
                let pod = self
                    .required(&bf, value.pos, "pod", "`bind`")
                    .and_then(|n| self.string(n, "`bind.pod`"));
                if let (Some(p), Some(n)) = (&pod, bf.get("pod")) {
                    if parse_namespaced(p).is_none() {
                        self.problem(n.pos, format!("`bind.pod` `{p}` is not NAMESPACE/NAME; expected for example `kube-system/kube-scheduler-abcde`"));
                        return None;
                    }
                }
                let node_name = self
                    .required(&bf, value.pos, "node", "`bind`")
                    .and_then(|n| self.string(n, "`bind.node`"));
                Action::Bind(Bind {
                    pod: pod?,
                    node: node_name?,
                })
            }
            "delay" => {
                let f = self.fields(
                    value,
                    "`delay`",
                    &["from", "to", "between", "latency", "jitter"],
                )?;
                let link = self.link(&f, value, "delay", &mut target_pos);
                let latency = self
                    .required(&f, value.pos, "latency", "`delay`")
                    .and_then(|n| self.positive(n, "`delay.latency`"));
                let jitter = match f.get("jitter") {
                    Some(n) => self.duration(n, "`delay.jitter`"),
                    None => Some(Duration::ZERO),
                };
                if let (Some(l), Some(j), Some(n)) = (latency, jitter, f.get("jitter")) {
                    if j > l {
                        self.problem(n.pos, format!("`delay.jitter` is {}, more than the latency {}; expected a jitter of at most the latency (a message cannot arrive before it was sent)", duration::human(j), duration::human(l)));
                        return None;
                    }
                }
                Action::Delay(Delay {
                    link: link?,
                    latency: latency?,
                    jitter: jitter?,
                })
            }
            "loss" => {
                let f = self.fields(value, "`loss`", &["from", "to", "between", "ratio"])?;
                let link = self.link(&f, value, "loss", &mut target_pos);
                let ratio = self
                    .required(&f, value.pos, "ratio", "`loss`")
                    .and_then(|n| self.ratio(n, "`loss.ratio`", false));
                Action::Loss(Loss {
                    link: link?,
                    ratio: ratio?,
                })
            }
            "api-errors" => Action::ApiErrors(self.api_errors(value)?),
            _ => unreachable!("ACTION_KEYS covers every key"),
        };
        Some(Step {
            at: at?,
            id,
            for_,
            action,
            pos: node.pos,
            target_pos,
        })
    }

    fn partition(&mut self, node: &Node, target_pos: &mut Vec<Pos>) -> Option<Partition> {
        match &node.value {
            Value::Seq(items) if items.len() == 2 => {
                self.both_ways(items, "`partition`", target_pos)
            }
            Value::Map(_) => {
                let f = self.fields(node, "`partition`", &["from", "to", "between", "mode"])?;
                let link = self.link(&f, node, "partition", target_pos);
                let reset = match f.get("mode") {
                    None => Some(false),
                    Some(n) => match self.string(n, "`partition.mode`")?.as_str() {
                        "hold" => Some(false),
                        "reset" => Some(true),
                        other => {
                            self.problem(n.pos, format!("`partition.mode: {other}` is unknown; expected `hold` (the default: packets vanish and are retransmitted once it heals) or `reset` (every connection across it is reset)"));
                            None
                        }
                    },
                };
                Some(Partition {
                    reset: reset?,
                    ..link?
                })
            }
            other => {
                self.problem(node.pos, format!("`partition` is {}; expected two targets `[A, B]`, one way `{{from: A, to: B}}`, or `{{between: [A, B], mode: reset}}`", match other {
                    Value::Seq(items) => format!("a list of {}", items.len()),
                    v => v.kind().to_owned(),
                }));
                None
            }
        }
    }

    /// A link both ways between the two targets of `[A, B]`.
    fn both_ways(
        &mut self,
        items: &[Node],
        what: &str,
        target_pos: &mut Vec<Pos>,
    ) -> Option<Partition> {
        let a = self.target(&items[0], what);
        let b = self.target(&items[1], what);
        target_pos.extend([items[0].pos, items[1].pos]);
        Some(Partition {
            a: a?,
            b: b?,
            oneway: false,
            reset: false,
        })
    }

    /// The link of `delay`, `loss` or a mapping `partition`: `from`/`to` (one way) or
    /// `between: [A, B]` (both).
    fn link(
        &mut self,
        f: &Fields<'_>,
        node: &Node,
        key: &str,
        target_pos: &mut Vec<Pos>,
    ) -> Option<Partition> {
        let expected = format!(
            "expected `from: A, to: B` (one way) or `between: [A, B]` (both ways) in `{key}`"
        );
        match (f.get("between"), f.get("from"), f.get("to")) {
            (Some(between), None, None) => match &between.value {
                Value::Seq(items) if items.len() == 2 => {
                    self.both_ways(items, &format!("`{key}.between`"), target_pos)
                }
                other => {
                    self.problem(
                        between.pos,
                        format!(
                            "`{key}.between` is {}; expected two targets `[A, B]`",
                            match other {
                                Value::Seq(items) => format!("a list of {}", items.len()),
                                v => v.kind().to_owned(),
                            }
                        ),
                    );
                    None
                }
            },
            (None, Some(from), Some(to)) => {
                let a = self.target(from, &format!("`{key}.from`"));
                let b = self.target(to, &format!("`{key}.to`"));
                target_pos.extend([from.pos, to.pos]);
                Some(Partition {
                    a: a?,
                    b: b?,
                    oneway: true,
                    reset: false,
                })
            }
            (Some(_), _, _) => {
                self.problem(
                    node.pos,
                    format!("`{key}` has both `between` and `from`/`to`; {expected}"),
                );
                None
            }
            _ => {
                self.problem(node.pos, format!("`{key}` names no link; {expected}"));
                None
            }
        }
    }

    /// A duration above zero.
    fn positive(&mut self, node: &Node, what: &str) -> Option<Duration> {
        let d = self.duration(node, what)?;
        if d.is_zero() {
            self.problem(
                node.pos,
                format!("{what} is 0; expected a duration above zero, like 500ms or 3s"),
            );
            return None;
        }
        Some(d)
    }

    /// A ratio: above 0 and below 1, or up to 1 with `whole`.
    fn ratio(&mut self, node: &Node, what: &str, whole: bool) -> Option<Ratio> {
        let range = if whole {
            "above 0 and at most 1"
        } else {
            "above 0 and below 1"
        };
        let f = match &node.value {
            Value::Int(n) => *n as f64,
            Value::Float(f) => *f,
            other => {
                self.problem(
                    node.pos,
                    format!(
                        "{what} is {}; expected a number {range}, like 0.3",
                        other.kind()
                    ),
                );
                return None;
            }
        };
        let ok = f > 0.0 && (f < 1.0 || (whole && f == 1.0));
        if !ok || Ratio::new(f).get() == 0.0 {
            let hint = if !whole && f >= 1.0 {
                " (a link that loses every message is a `partition`)"
            } else {
                ""
            };
            self.problem(
                node.pos,
                format!("{what} is {f}; expected a number {range}{hint}"),
            );
            return None;
        }
        Some(Ratio::new(f))
    }

    /// A list of strings.
    fn strings(&mut self, node: &Node, what: &str) -> Option<Vec<String>> {
        let Value::Seq(items) = &node.value else {
            self.problem(
                node.pos,
                format!(
                    "{what} is {}; expected a list like `[a, b]`",
                    node.value.kind()
                ),
            );
            return None;
        };
        let mut out = Vec::new();
        for item in items {
            out.push(self.string(item, what)?);
        }
        if out.is_empty() {
            self.problem(
                node.pos,
                format!(
                    "{what} is empty; expected at least one entry, or no `{}` at all (any)",
                    what.trim_matches('`').rsplit('.').next().unwrap_or(what)
                ),
            );
            return None;
        }
        Some(out)
    }

    fn api_errors(&mut self, node: &Node) -> Option<ApiErrors> {
        const KEYS: &[&str] = &[
            "status",
            "ratio",
            "retry-after",
            "verbs",
            "resources",
            "namespaces",
            "users",
        ];
        let f = self.fields(node, "`api-errors`", KEYS)?;
        let status = self
            .required(&f, node.pos, "status", "`api-errors`")
            .and_then(|n| match &n.value {
                Value::Int(code) if (400..=599).contains(code) => Some(*code as u16),
                other => {
                    let seen = match other {
                        Value::Int(code) => code.to_string(),
                        v => v.kind().to_owned(),
                    };
                    self.problem(n.pos, format!("`api-errors.status` is {seen}; expected an HTTP error status from 400 to 599, like 500, 503 or 429"));
                    None
                }
            });
        let ratio = match f.get("ratio") {
            Some(n) => self.ratio(n, "`api-errors.ratio`", true),
            None => Some(Ratio::new(1.0)),
        };
        let retry_after = match f.get("retry-after") {
            Some(n) => {
                let d = self.positive(n, "`api-errors.retry-after`");
                if let Some(d) = d {
                    if d.subsec_millis() != 0 {
                        self.problem(n.pos, format!("`api-errors.retry-after` is {}; expected whole seconds (the `Retry-After` header counts seconds), like 5s", duration::human(d)));
                        return None;
                    }
                }
                Some(d?)
            }
            None => None,
        };
        let mut list = |key: &str| match f.get(key) {
            Some(n) => self
                .strings(n, &format!("`api-errors.{key}`"))
                .map(|l| (l, Some(n.pos))),
            None => Some((Vec::new(), None)),
        };
        let verbs = list("verbs");
        let resources = list("resources");
        let namespaces = list("namespaces");
        let users = list("users");
        if let Some((vs, Some(pos))) = &verbs {
            for v in vs {
                if !API_VERBS.contains(&v.as_str()) {
                    let hint = suggest(v, API_VERBS)
                        .map(|s| format!(" (did you mean `{s}`?)"))
                        .unwrap_or_default();
                    self.problem(
                        *pos,
                        format!(
                            "`api-errors.verbs` has `{v}`{hint}; expected verbs among {}",
                            ticked(API_VERBS)
                        ),
                    );
                }
            }
        }
        if let Some((rs, Some(pos))) = &resources {
            for r in rs {
                let ok = r.split('/').count() <= 2
                    && r.split('/').all(|p| {
                        !p.is_empty()
                            && p.chars().all(|c| {
                                c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.'
                            })
                    });
                if !ok {
                    self.problem(*pos, format!("`api-errors.resources` has `{r}`; expected resources as the API names them, plural and lower-case, a subresource after a `/`: `leases`, `pods`, `pods/binding`"));
                }
            }
        }
        let (verbs, resources, namespaces, users) =
            (verbs?.0, resources?.0, namespaces?.0, users?.0);
        if verbs.is_empty() && resources.is_empty() && namespaces.is_empty() && users.is_empty() {
            self.problem(node.pos, "`api-errors` matches every request; expected at least one of `verbs`, `resources`, `namespaces` or `users`, so that it says which requests fail (every request failing is `api-server: stop`)".to_owned());
            return None;
        }
        Some(ApiErrors {
            status: status?,
            ratio: ratio?,
            retry_after,
            verbs,
            resources,
            namespaces,
            users,
        })
    }

    fn invariant(&mut self, node: &Node) -> Option<Invariant> {
        let f = self.fields(node, "an invariant", INVARIANT_KEYS)?;
        let keys: Vec<&str> = INVARIANT_KEYS
            .iter()
            .copied()
            .filter(|k| f.get(k).is_some())
            .collect();
        let key = match keys.as_slice() {
            [one] => *one,
            [] => {
                self.problem(
                    node.pos,
                    format!(
                        "an invariant is empty; expected one of {}",
                        ticked(INVARIANT_KEYS)
                    ),
                );
                return None;
            }
            many => {
                self.problem(
                    node.pos,
                    format!(
                        "an entry of `expect` has {} invariants ({}); expected one per entry",
                        many.len(),
                        ticked(many)
                    ),
                );
                return None;
            }
        };
        let value = f.get(key).expect("present");
        let what = format!("`{key}`");
        match key {
            "leader-reacquired" => {
                let g = self.fields(value, &what, &["lease", "within", "after"])?;
                let lease = self
                    .required(&g, value.pos, "lease", &what)
                    .and_then(|n| self.lease(n, "`leader-reacquired.lease`"));
                let within = self
                    .required(&g, value.pos, "within", &what)
                    .and_then(|n| self.duration(n, "`within`"));
                let after = self.after(&g)?;
                Some(Invariant::LeaderReacquired(LeaderReacquired {
                    lease: lease?,
                    within: within?,
                    after,
                }))
            }
            "schedulable" => {
                let g = self.fields(value, &what, &["within", "after"])?;
                let within = self
                    .required(&g, value.pos, "within", &what)
                    .and_then(|n| self.duration(n, "`within`"));
                let after = self.after(&g)?;
                Some(Invariant::Schedulable(Schedulable {
                    within: within?,
                    after,
                }))
            }
            "unschedulable" => {
                let g = self.fields(value, &what, &["for", "after"])?;
                let for_ = self
                    .required(&g, value.pos, "for", &what)
                    .and_then(|n| self.duration(n, "`for`"));
                let after = self.after(&g)?;
                Some(Invariant::Unschedulable(Unschedulable {
                    for_: for_?,
                    after,
                }))
            }
            "single-leader" => {
                let g = self.fields(value, &what, &["lease", "min-terms"])?;
                let lease = self
                    .required(&g, value.pos, "lease", &what)
                    .and_then(|n| self.lease(n, "`single-leader.lease`"));
                let min_terms = self.min_terms(&g, "single-leader")?;
                Some(Invariant::SingleLeader(SingleLeader {
                    lease: lease?,
                    min_terms,
                }))
            }
            "valid-lease-while-leading" => {
                let g = self.fields(value, &what, &["lease", "tolerance", "min-terms"])?;
                let lease = self
                    .required(&g, value.pos, "lease", &what)
                    .and_then(|n| self.lease(n, "`valid-lease-while-leading.lease`"));
                let tolerance = match g.get("tolerance") {
                    Some(n) => Some(self.duration(n, "`tolerance`")?),
                    None => None,
                };
                let min_terms = self.min_terms(&g, "valid-lease-while-leading")?;
                Some(Invariant::ValidLeaseWhileLeading(ValidLeaseWhileLeading {
                    lease: lease?,
                    tolerance: tolerance.unwrap_or(std::time::Duration::from_secs(2)),
                    min_terms,
                }))
            }
            "available" => {
                let g = self.fields(value, &what, &["deployment", "within", "after"])?;
                let dep = self
                    .required(&g, value.pos, "deployment", &what)
                    .and_then(|n| self.string(n, "`available.deployment`"));
                if let (Some(d), Some(n)) = (&dep, g.get("deployment")) {
                    if parse_namespaced(d).is_none() {
                        self.problem(n.pos, format!("`available.deployment` `{d}` is not NAMESPACE/NAME; expected for example `kube-system/kube-scheduler`"));
                        return None;
                    }
                }
                let within = self
                    .required(&g, value.pos, "within", &what)
                    .and_then(|n| self.duration(n, "`within`"));
                let after = self.after(&g)?;
                Some(Invariant::Available(Available {
                    deployment: dep?,
                    within: within?,
                    after,
                }))
            }
            _ => unreachable!("INVARIANT_KEYS covers every key"),
        }
    }

    /// `after:` (optional). Outer None: a problem was reported.
    fn after(&mut self, g: &Fields<'_>) -> Option<Option<String>> {
        match g.get("after") {
            Some(n) => Some(Some(self.string(n, "`after`")?)),
            None => Some(None),
        }
    }
}

/// `NAMESPACE/NAME` with both parts non-empty DNS-ish names.
pub(crate) fn parse_namespaced(text: &str) -> Option<(String, String)> {
    let (ns, name) = text.split_once('/')?;
    let ok = |s: &str| {
        !s.is_empty()
            && s.len() <= 253
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
    };
    (ok(ns) && ok(name) && !name.contains('/')).then(|| (ns.to_owned(), name.to_owned()))
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Parse a target as written in a scenario file.
pub(crate) fn parse_target(text: &str) -> Result<Target, SyntaxError> {
    const EXPECTED: &str = "expected `api-server[/N]`, `etcd[/N|/leader]`, `kube-scheduler[/N|/leader]`, `kube-controller-manager[/N|/leader]`, `agent/NAME[/N|/leader]` or `node/NAME`";
    let selector = |s: Option<&str>| -> Result<Selector, SyntaxError> {
        match s {
            None => Ok(Selector::All),
            Some("leader") => Ok(Selector::Leader),
            Some(n) => n.parse::<u32>().map(Selector::Index).map_err(|_| {
                SyntaxError(format!(
                    "`{text}`: `{n}` is not a replica number or `leader`; {EXPECTED}"
                ))
            }),
        }
    };
    let mut parts = text.splitn(3, '/');
    let head = parts.next().unwrap_or_default();
    let second = parts.next();
    let third = parts.next();
    match head {
        "api-server" if third.is_none() => match selector(second)? {
            Selector::Leader => Err(SyntaxError(format!(
                "`{text}`: API servers do not elect a leader; {EXPECTED}"
            ))),
            sel => Ok(Target::ApiServer(sel)),
        },
        "etcd" if third.is_none() => Ok(Target::Etcd(selector(second)?)),
        "agent" => {
            let name = second
                .filter(|n| is_dns_label(n))
                .ok_or_else(|| SyntaxError(format!("`{text}` names no agent group; {EXPECTED}")))?;
            Ok(Target::Agent(name.to_owned(), selector(third)?))
        }
        "node" => {
            let name = second
                .filter(|n| !n.is_empty() && third.is_none())
                .ok_or_else(|| SyntaxError(format!("`{text}` names no node; {EXPECTED}")))?;
            Ok(Target::Node(name.to_owned()))
        }
        c => match Component::from_name(c) {
            Some(component) if third.is_none() => {
                Ok(Target::Component(component, selector(second)?))
            }
            _ => {
                let hint = suggest(
                    c,
                    &[
                        "api-server",
                        "etcd",
                        "kube-scheduler",
                        "kube-controller-manager",
                        "agent",
                        "node",
                    ],
                )
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
                Err(SyntaxError(format!(
                    "unknown target `{text}`{hint}; {EXPECTED}"
                )))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn scenario(faults: &str) -> Result<Scenario, String> {
        let yaml = format!(
            "name: t\ncluster:\n  nodes: 2\n  components: {{kube-scheduler: {{replicas: 2}}}}\n  agents: [{{name: a, replicas: 2, lease: default/a}}]\nfaults:\n{faults}"
        );
        crate::scenario::parse(Path::new("t.yaml"), yaml.as_bytes()).map_err(|e| e.to_string())
    }

    fn agents(agents: &str) -> Result<Scenario, String> {
        let yaml = format!("name: t\ncluster:\n  nodes: 1\n  agents:\n{agents}");
        crate::scenario::parse(Path::new("t.yaml"), yaml.as_bytes()).map_err(|e| e.to_string())
    }

    /// A pod agent names its pods; what only agents kubechaos starts take, a selector that is
    /// empty or not a selector, and patterns that do not compile are each said where they stand.
    #[test]
    fn pod_agents_take_a_namespace_and_a_selector_and_nothing_that_starts_replicas() {
        let a = agents("    - {name: op, lease: ops/op, pods: {namespace: ops, selector: app=op}, leading: {started: 'acquired lease', stopped: 'lost|stopped leading'}}\n").unwrap();
        let op = &a.cluster.agents[0];
        assert!(op.is_pods());
        assert_eq!(op.replicas, 0, "a pod agent starts no replicas");
        assert_eq!(op.pods.as_ref().unwrap().selector, "app=op");
        assert_eq!(
            op.leading.as_ref().unwrap().stopped.as_deref(),
            Some("lost|stopped leading")
        );

        let e = agents("    - {name: op, lease: ops/op, replicas: 2, mode: correct, command: [x], pods: {namespace: ops, selector: app=op}}\n").unwrap_err();
        for key in ["replicas", "mode", "command"] {
            assert!(
                e.contains(&format!("a pod agent (`pods`) has `{key}`")),
                "{e}"
            );
        }
        let e = agents("    - {name: op, lease: ops/op, pods: {namespace: ops, selector: ''}}\n")
            .unwrap_err();
        assert!(
            e.contains("t.yaml:5:66: `agent.pods.selector` is empty"),
            "{e}"
        );
        let e = agents(
            "    - {name: op, lease: ops/op, pods: {namespace: ops, selector: 'app=a b'}}\n",
        )
        .unwrap_err();
        assert!(
            e.contains("`agent.pods.selector`: `a b` is not a label value"),
            "{e}"
        );
        let e =
            agents("    - {name: op, lease: ops/op, pods: {namespace: Ops, selector: app=op}}\n")
                .unwrap_err();
        assert!(e.contains("`Ops` is not a namespace name"), "{e}");
        let e = agents("    - {name: op, lease: ops/op, pods: {selector: app=op}}\n").unwrap_err();
        assert!(e.contains("namespace"), "{e}");
        let e = agents("    - {name: op, lease: ops/op, pods: {namespace: ops, selector: app=op}, leading: {started: 'acquired (lease'}}\n").unwrap_err();
        assert!(
            e.contains("`agent.leading.started` is not a regular expression"),
            "{e}"
        );
        let e = agents("    - {name: op, lease: ops/op, pods: {namespace: ops, selector: app=op}, leading: {stopped: lost}}\n").unwrap_err();
        assert!(e.contains("`agent.leading` has no `started`"), "{e}");
        let e = agents("    - {name: op, lease: ops/op, mode: correct, leading: {started: x}}\n")
            .unwrap_err();
        assert!(e.contains("`leading` on the reference agent"), "{e}");
        // A command agent may say how its log tells leadership.
        assert!(agents(
            "    - {name: op, lease: ops/op, command: [./op], leading: {started: x}}\n"
        )
        .is_ok());
    }

    /// `identity` says how a pod agent's holder identities name its pods; it is a pattern, and
    /// only a pod agent's.
    #[test]
    fn an_identity_pattern_belongs_to_a_pod_agent_and_must_compile() {
        let a = agents("    - {name: op, lease: ops/op, pods: {namespace: ops, selector: app=op}, identity: '^leader-(.+)$'}\n").unwrap();
        let op = &a.cluster.agents[0];
        let re = op.identity_pattern().expect("a pattern");
        let pods = vec!["op-1".to_owned(), "op-2".to_owned()];
        assert_eq!(
            crate::scenario::holder_pod(Some(&re), "leader-op-2", &pods),
            Some(&pods[1])
        );
        let e = agents("    - {name: op, lease: ops/op, pods: {namespace: ops, selector: app=op}, identity: 'leader-(.+'}\n").unwrap_err();
        assert!(
            e.contains("t.yaml:5:85: `agent.identity` is not a regular expression"),
            "{e}"
        );
        let e = agents("    - {name: op, lease: ops/op, command: [./op], identity: '(.+)'}\n")
            .unwrap_err();
        assert!(e.contains("`identity` on an agent without `pods`"), "{e}");
    }

    /// A pod agent's pods have names, not numbers.
    #[test]
    fn pod_agents_refuse_replica_numbers() {
        let yaml = "name: t\ncluster:\n  agents: [{name: op, lease: ops/op, pods: {namespace: ops, selector: app=op}}]\nfaults:\n  - {at: 1s, kill: agent/op/0}\n  - {at: 2s, kill: agent/op/leader}\n";
        let e = crate::scenario::parse(Path::new("t.yaml"), yaml.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("t.yaml:5:20: target `agent/op/0`: agent `op` is a pod agent"),
            "{e}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
    }

    /// Manifests are read against the scenario file's directory when it is loaded: a missing
    /// file is said at the scenario's line, a broken object at the manifest's own.
    #[test]
    fn manifests_are_read_when_the_scenario_is_loaded() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("m")).unwrap();
        std::fs::write(
            dir.path().join("m/ok.yaml"),
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: ops}\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("m/bad.yaml"),
            "apiVersion: v1\nmetadata: {name: x}\n",
        )
        .unwrap();
        let file = dir.path().join("t.yaml");
        let load = |list: &str| {
            std::fs::write(&file, format!("name: t\ncluster:\n  manifests: {list}\n")).unwrap();
            crate::scenario::load(&file).map_err(|e| e.to_string())
        };
        let s = load("[m/ok.yaml]").unwrap();
        assert_eq!(s.cluster.manifests[0].objects[0]["kind"], "Namespace");
        assert_eq!(s.cluster.manifests[0].file, dir.path().join("m/ok.yaml"));
        let e = load("[m/ok.yaml, m/missing.yaml]").unwrap_err();
        assert!(
            e.contains("t.yaml:3:26: `cluster.manifests`: cannot read `m/missing.yaml`"),
            "{e}"
        );
        let e = load("[m/bad.yaml]").unwrap_err();
        assert!(e.contains("m/bad.yaml:1:1: an object has no `kind`"), "{e}");
        let e = load("m/ok.yaml").unwrap_err();
        assert!(
            e.contains("`cluster.manifests` is a string; expected a list of files"),
            "{e}"
        );
    }

    /// Every action key decodes to the model, is written back the way the format writes it, and
    /// what is written decodes to the same action.
    #[test]
    fn every_action_decodes_and_its_text_decodes_to_the_same_action() {
        let steps = [
            ("api-server: stop", "api-server: stop"),
            ("etcd: crash", "etcd: crash"),
            (
                "partition: [kube-scheduler/leader, api-server]",
                "partition: [kube-scheduler/leader, api-server]",
            ),
            (
                "partition: {from: agent/a/1, to: etcd}",
                "partition: {from: agent/a/1, to: etcd}",
            ),
            (
                "partition: {between: [agent/a/1, api-server]}",
                "partition: [agent/a/1, api-server]",
            ),
            (
                "partition: {from: agent/a/1, to: etcd, mode: hold}",
                "partition: {from: agent/a/1, to: etcd}",
            ),
            (
                "partition: {between: [agent/a/1, api-server], mode: reset}",
                "partition: {between: [agent/a/1, api-server], mode: reset}",
            ),
            ("heal: all", "heal: all"),
            ("kill: node/node-1", "kill: node/node-1"),
            ("remove: kube-scheduler", "remove: kube-scheduler"),
            ("start: agent/a", "start: agent/a"),
            (
                "delete-pods: {namespace: kube-system, selector: 'component=kube-scheduler'}",
                "delete-pods: {namespace: kube-system, selector: component=kube-scheduler}",
            ),
            (
                "bind: {pod: default/p, node: node-0}",
                "bind: {pod: default/p, node: node-0}",
            ),
            (
                "delay: {from: kube-scheduler/leader, to: api-server, latency: 3s, jitter: 500ms}",
                "delay: {from: kube-scheduler/leader, to: api-server, latency: 3s, jitter: 500ms}",
            ),
            (
                "delay: {between: [agent/a, api-server], latency: 1500ms}",
                "delay: {between: [agent/a, api-server], latency: 1.5s}",
            ),
            (
                "loss: {from: api-server, to: etcd, ratio: 0.3}",
                "loss: {from: api-server, to: etcd, ratio: 0.3}",
            ),
            (
                "api-errors: {status: 500, ratio: 0.5, verbs: [update], resources: [leases]}",
                "api-errors: {status: 500, ratio: 0.5, verbs: [update], resources: [leases]}",
            ),
            (
                "api-errors: {status: 429, retry-after: 5s, users: ['system:kube-scheduler']}",
                "api-errors: {status: 429, ratio: 1, retry-after: 5s, users: [system:kube-scheduler]}",
            ),
        ];
        let keys: std::collections::BTreeSet<&str> = steps
            .iter()
            .map(|(w, _)| w.split(':').next().unwrap())
            .chain(["recover"]) // needs a self-hosted cluster; tested by `recover`'s own tests
            .collect();
        assert_eq!(keys, ACTION_KEYS.iter().copied().collect());
        for (written, shown) in steps {
            let s = scenario(&format!("  - {{at: 1s, {written}}}\n")).unwrap();
            let action = &s.faults[0].action;
            assert_eq!(action.to_string(), shown);
            let again = scenario(&format!("  - {{at: 1s, {}}}\n", action)).unwrap();
            assert_eq!(&again.faults[0].action, action, "{written}");
        }
    }

    #[test]
    fn every_invariant_key_decodes_to_the_invariant_of_that_key() {
        let written = [
            "leader-reacquired: {lease: default/a, within: 1m}",
            "schedulable: {within: 1m}",
            "unschedulable: {for: 10s}",
            "single-leader: {lease: kube-system/kube-scheduler}",
            "valid-lease-while-leading: {lease: default/a, tolerance: 3s}",
        ];
        let yaml = format!(
            "name: t\ncluster:\n  nodes: 1\n  components: {{kube-scheduler: {{replicas: 1}}}}\n  agents: [{{name: a, replicas: 1, lease: default/a}}]\nexpect:\n{}",
            written.map(|w| format!("  - {w}\n")).concat()
        );
        let s = crate::scenario::parse(Path::new("t.yaml"), yaml.as_bytes()).unwrap();
        let keys: Vec<&str> = s.expect.iter().map(|i| i.value.key()).collect();
        let expected: Vec<&str> = written.map(|w| w.split(':').next().unwrap()).to_vec();
        assert_eq!(keys, expected);
        // `available` needs a Deployment, which only a self-hosted cluster has here.
        let all: std::collections::BTreeSet<&str> =
            expected.into_iter().chain(["available"]).collect();
        assert_eq!(all, INVARIANT_KEYS.iter().copied().collect());
    }

    #[test]
    fn targets_follow_their_grammar() {
        use crate::scenario::{Component::KubeScheduler, Selector};
        let ok = [
            ("api-server", Target::API_SERVER),
            ("etcd", Target::ETCD),
            (
                "kube-scheduler",
                Target::Component(KubeScheduler, Selector::All),
            ),
            (
                "kube-scheduler/1",
                Target::Component(KubeScheduler, Selector::Index(1)),
            ),
            (
                "kube-scheduler/leader",
                Target::Component(KubeScheduler, Selector::Leader),
            ),
            ("agent/a/0", Target::Agent("a".into(), Selector::Index(0))),
            ("node/node-2", Target::Node("node-2".into())),
            ("api-server/2", Target::ApiServer(Selector::Index(2))),
            ("etcd/1", Target::Etcd(Selector::Index(1))),
            ("etcd/leader", Target::Etcd(Selector::Leader)),
        ];
        for (text, target) in ok {
            assert_eq!(parse_target(text).as_ref(), Ok(&target), "{text}");
            assert_eq!(target.to_string(), text);
        }
        let bad = [
            (
                "kube-schedular",
                "unknown target `kube-schedular` (did you mean `kube-scheduler`?)",
            ),
            (
                "kube-scheduler/x",
                "`kube-scheduler/x`: `x` is not a replica number or `leader`",
            ),
            ("agent", "`agent` names no agent group"),
            ("node/a/b", "`node/a/b` names no node"),
            (
                "etcd/x",
                "`etcd/x`: `x` is not a replica number or `leader`",
            ),
            (
                "api-server/leader",
                "`api-server/leader`: API servers do not elect a leader",
            ),
            ("etcd/0/1", "unknown target `etcd/0/1`"),
        ];
        for (text, message) in bad {
            let err = parse_target(text).unwrap_err();
            assert!(err.starts_with(message), "{text}: {err}");
            assert!(err.contains("expected `api-server[/N]`"), "{text}: {err}");
        }
    }

    #[test]
    fn every_problem_is_reported_at_once_with_its_position() {
        let err = scenario(
            "  - {at: 1s, kill: kube-schedular}\n  - {at: 2s, api-server: pause}\n  - {at: 3s, heal: all, kill: etcd}\n  - {at: 4s}\n",
        )
        .unwrap_err();
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 4, "{err}");
        assert!(
            lines[0].starts_with("t.yaml:7:20: `kill`: unknown target `kube-schedular`"),
            "{err}"
        );
        assert!(
            lines[1].starts_with("t.yaml:8:26: `api-server: pause` is unknown; expected `stop`, `start`, `restart` or `crash`"),
            "{err}"
        );
        assert!(
            lines[2].starts_with("t.yaml:9:5: a fault step has 2 actions (`heal`, `kill`); expected exactly one per step"),
            "{err}"
        );
        assert!(
            lines[3].starts_with("t.yaml:10:5: a fault step has no action"),
            "{err}"
        );
    }

    /// Degradation faults refuse what means nothing: each problem at its position, with what
    /// is expected.
    #[test]
    fn degradation_faults_refuse_what_means_nothing() {
        let cases = [
            ("loss: {from: api-server, to: etcd, ratio: 1.5}", ":7:56: `loss.ratio` is 1.5; expected a number above 0 and below 1"),
            ("loss: {from: api-server, to: etcd, ratio: 1}", "(a link that loses every message is a `partition`)"),
            ("loss: {between: [api-server, etcd], ratio: 0}", "`loss.ratio` is 0; expected a number above 0 and below 1"),
            ("loss: {from: api-server, to: etcd, ratio: high}", "`loss.ratio` is a string; expected a number above 0 and below 1"),
            ("api-errors: {status: 500, ratio: -0.5, verbs: [update]}", "`api-errors.ratio` is -0.5; expected a number above 0 and at most 1"),
            ("delay: {from: api-server, to: etcd, latency: 0s}", "`delay.latency` is 0; expected a duration above zero"),
            ("delay: {from: api-server, to: etcd, latency: -1s}", "`delay.latency`: "),
            ("delay: {from: api-server, to: etcd, latency: 1s, jitter: 2s}", "`delay.jitter` is 2s, more than the latency 1s"),
            ("delay: {from: api-server, latency: 1s}", "`delay` names no link; expected `from: A, to: B` (one way) or `between: [A, B]` (both ways)"),
            ("delay: {between: [api-server], latency: 1s}", "`delay.between` is a list of 1; expected two targets `[A, B]`"),
            ("delay: {between: [api-server, etcd], from: etcd, to: api-server, latency: 1s}", "has both `between` and `from`/`to`"),
            ("delay: {between: [api-server, schedular], latency: 1s}", "`delay.between`: unknown target `schedular`"),
            ("api-errors: {status: 200, verbs: [update]}", ":7:35: `api-errors.status` is 200; expected an HTTP error status from 400 to 599"),
            ("api-errors: {status: '500', verbs: [update]}", "`api-errors.status` is a string; expected an HTTP error status"),
            ("api-errors: {status: 500}", ":7:26: `api-errors` matches every request; expected at least one of `verbs`, `resources`, `namespaces` or `users`"),
            ("api-errors: {status: 500, verbs: []}", "`api-errors.verbs` is empty; expected at least one entry"),
            ("api-errors: {status: 500, verbs: [updat]}", "`api-errors.verbs` has `updat` (did you mean `update`?); expected verbs among"),
            ("api-errors: {status: 500, resources: [Leases]}", "`api-errors.resources` has `Leases`; expected resources as the API names them"),
            ("api-errors: {status: 429, retry-after: 1500ms, verbs: [get]}", "`api-errors.retry-after` is 1.5s; expected whole seconds"),
            ("api-errors: {status: 500, verbs: [update], code: 3}", "unknown key `code` in `api-errors`"),
            ("partition: {from: api-server, to: etcd, mode: rst}", "`partition.mode: rst` is unknown; expected `hold`"),
            ("partition: {from: api-server}", "`partition` names no link"),
        ];
        for (step, expected) in cases {
            let err = scenario(&format!("  - {{at: 1s, {step}}}\n")).unwrap_err();
            assert!(err.contains(expected), "{step}: {err}");
        }
        let err = scenario("  - {at: 1s, for: 5s, delay: {between: [etcd, etcd], latency: 1s}}\n")
            .unwrap_err();
        assert!(
            err.contains("`delay` acts on a link from `etcd` to itself"),
            "{err}"
        );
    }

    /// `sim:` carries a seed and a step; what is not one is refused at its position.
    #[test]
    fn sim_settings_are_a_seed_and_a_step() {
        let parse = |sim: &str| {
            crate::scenario::parse(
                Path::new("t.yaml"),
                format!("name: t\nsim: {sim}\n").as_bytes(),
            )
            .map(|s| s.sim)
            .map_err(|e| e.to_string())
        };
        let ok = parse("{seed: 11, step: 100ms}").unwrap();
        assert_eq!(
            (ok.seed, ok.step),
            (Some(11), Some(Duration::from_millis(100)))
        );
        assert_eq!(parse("{}").unwrap(), SimSettings::default());
        for (bad, expected) in [
            (
                "{seed: -1}",
                "t.yaml:2:13: `sim.seed` is a number; expected a whole number of 0 or more",
            ),
            ("{seed: x}", "`sim.seed` is a string"),
            (
                "{step: 2s}",
                "`sim.step` is 2s; expected whole milliseconds from 1ms to 1s",
            ),
            (
                "{step: 0ms}",
                "`sim.step` is 0; expected a duration above zero",
            ),
            ("{tick: 20ms}", "unknown key `tick` in `sim`"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(expected), "{bad}: {e}");
        }
    }

    #[test]
    fn typos_in_keys_get_a_suggestion() {
        assert_eq!(suggest("parition", ACTION_KEYS), Some("partition"));
        assert_eq!(suggest("scheduable", INVARIANT_KEYS), Some("schedulable"));
        assert_eq!(suggest("xyz", ACTION_KEYS), None);
    }
}

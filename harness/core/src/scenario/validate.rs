//! Checks that need the whole scenario: targets the cluster has, leases someone holds, anchors
//! that exist, faults inside the run.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::decode::{ticked, Problem};
use super::duration::human;
use super::model::*;

/// Margin added after the last deadline when `duration:` is not given.
pub(crate) const DEFAULT_MARGIN: Duration = Duration::from_secs(30);

impl Scenario {
    /// The moment the last fault ends (everything started again and healed), as planned.
    pub(crate) fn last_fault_end(&self) -> Duration {
        self.faults.iter().map(Step::end).max().unwrap_or_default()
    }

    /// The planned anchor of an invariant: its `after:` step's time, or the end of the last fault.
    pub(crate) fn planned_anchor(&self, inv: &Invariant) -> Duration {
        match inv.after_step() {
            Some((id, end)) => self
                .faults
                .iter()
                .find(|s| s.id.as_deref() == Some(id))
                .map(|s| if end { s.end() } else { s.at })
                .unwrap_or_default(),
            None => self.last_fault_end(),
        }
    }

    /// How long the run lasts: `duration:`, or the last fault's end + the longest window + margin.
    pub fn run_duration(&self) -> Duration {
        self.duration.unwrap_or_else(|| {
            let last_deadline = self
                .expect
                .iter()
                .map(|i| self.planned_anchor(&i.value) + i.value.window())
                .max()
                .unwrap_or_default();
            last_deadline.max(self.last_fault_end()) + DEFAULT_MARGIN
        })
    }

    /// The Deployments (`NAMESPACE/NAME`) that `available` invariants name.
    pub fn deployments(&self) -> std::collections::BTreeSet<String> {
        self.expect
            .iter()
            .filter_map(|i| match &i.value {
                Invariant::Available(a) => Some(a.deployment.to_string()),
                _ => None,
            })
            .collect()
    }

    /// Every Lease some candidate competes for, with the candidates' group name.
    pub fn leases(&self) -> BTreeMap<LeaseRef, String> {
        let mut out = BTreeMap::new();
        for c in self.cluster.components.keys() {
            out.insert(c.lease(), c.name().to_owned());
        }
        for a in &self.cluster.agents {
            out.insert(a.lease.clone(), format!("agent/{}", a.name));
        }
        out
    }
}

/// Check a decoded scenario. Every problem is returned, with its position.
pub fn validate(s: &Scenario) -> Vec<Problem> {
    let mut problems = Vec::new();

    // Agents: unique names, unique leases, none on a component's lease.
    let mut names = BTreeSet::new();
    let mut leases: BTreeMap<LeaseRef, String> = s
        .cluster
        .components
        .keys()
        .map(|c| (c.lease(), c.name().to_owned()))
        .collect();
    for a in &s.cluster.agents {
        if RESERVED_GROUPS.contains(&a.name.as_str()) {
            problems.push((
                a.pos,
                format!(
                    "agent group name `{}` is reserved; expected a name other than {}",
                    a.name,
                    ticked(RESERVED_GROUPS)
                ),
            ));
        }
        if !names.insert(a.name.clone()) {
            problems.push((
                a.pos,
                format!(
                    "agent group `{}` is defined twice; expected unique names",
                    a.name
                ),
            ));
        }
        if let Some(owner) = leases.insert(a.lease.clone(), format!("agent/{}", a.name)) {
            problems.push((a.pos, format!("lease `{}` of agent `{}` is already used by {owner}; expected one lease per group", a.lease, a.name)));
        }
    }

    // Steps: ids, targets, `for`.
    let mut ids = BTreeSet::new();
    for step in &s.faults {
        if let Some(id) = &step.id {
            if !ids.insert(id.clone()) {
                problems.push((
                    step.pos,
                    format!("step id `{id}` is used twice; expected unique ids"),
                ));
            }
        }
        for (i, target) in step.action.targets().into_iter().enumerate() {
            let pos = step.target_pos.get(i).copied().unwrap_or(step.pos);
            if let Some(p) = check_target(s, target) {
                problems.push((pos, p));
            }
        }
        if let Some(p) = step.action.link() {
            if p.a == p.b {
                let what = match step.action {
                    Action::Partition(_) => format!("cuts `{}` off from itself", p.a),
                    _ => format!("acts on a link from `{}` to itself", p.a),
                };
                problems.push((
                    step.pos,
                    format!(
                        "`{}` {what}; expected two different targets",
                        step.action.key(),
                    ),
                ));
            }
        }
        if step.for_.is_some() && !step.action.undoable() {
            problems.push((step.pos, format!(
                "`for` cannot undo `{}`; expected `for` only on api-server/etcd stop or crash, partition, delay, loss, api-errors and remove",
                step.action
            )));
        }
    }

    // Invariants: leases someone holds, anchors that exist.
    let held = s.leases();
    for inv in &s.expect {
        let lease = match &inv.value {
            Invariant::LeaderReacquired(i) => Some(&i.lease),
            Invariant::SingleLeader(i) => Some(&i.lease),
            Invariant::ValidLeaseWhileLeading(i) => Some(&i.lease),
            _ => None,
        };
        if let Some(lease) = lease {
            if !held.contains_key(lease) {
                let known = if held.is_empty() {
                    "no component or agent holds any lease in this cluster".to_owned()
                } else {
                    format!("leases held here: {}", ticked(held.keys()))
                };
                problems.push((
                    inv.pos,
                    format!(
                        "`{}` judges lease `{lease}`, which no component or agent holds; {known}",
                        inv.value.key()
                    ),
                ));
            }
        }
        if let Some((id, end)) = inv.value.after_step() {
            let after = inv.value.after().unwrap_or_default();
            if !ids.contains(id) {
                let known = if ids.is_empty() {
                    "no step has an `id`".to_owned()
                } else {
                    format!("step ids: {}", ticked(&ids))
                };
                problems.push((inv.pos, format!("`after: {after}` names no step; expected the `id` of a fault step, or `ID.end` for the moment its `for:` ends ({known})")));
            } else if end
                && s.faults
                    .iter()
                    .any(|st| st.id.as_deref() == Some(id) && st.for_.is_none())
            {
                problems.push((inv.pos, format!("`after: {after}`: step `{id}` has no `for:`, so nothing ends it; expected `after: {id}` (the moment it is applied), or a `for:` on the step")));
            }
        }
    }

    // Everything inside the run.
    if let Some(d) = s.duration {
        let pos = s.source.duration_pos;
        for step in &s.faults {
            if step.end() > d {
                let what = if step.for_.is_some() {
                    format!("ends at {}", human(step.end()))
                } else {
                    format!("is at {}", human(step.at))
                };
                problems.push((step.pos, format!("fault `{}` {what}, past the run's end at {} (`duration` at line {}); expected faults inside the run, or a longer `duration`", step.action, human(d), pos.line)));
            }
        }
        for inv in &s.expect {
            let deadline = s.planned_anchor(&inv.value) + inv.value.window();
            if deadline > d {
                problems.push((inv.pos, format!("`{}` needs watching until {}, past the run's end at {}; expected a longer `duration` or a shorter window", inv.value.label(), human(deadline), human(d))));
            }
        }
    }
    problems.sort_by_key(|(pos, _)| *pos);
    problems
}

fn check_target(s: &Scenario, target: &Target) -> Option<String> {
    match target {
        Target::Node(_) => None,
        Target::ApiServer(sel) => check_index(target, *sel, s.cluster.api_servers).map(|m| {
            format!("{m}; the cluster runs {} (`cluster.api-servers`)", plural(s.cluster.api_servers, "API server"))
        }),
        Target::Etcd(Selector::Leader) if s.cluster.etcd.members == 1 => Some(format!(
            "target `{target}`: a one-member etcd has no raft election to lead; expected `etcd` (or `cluster.etcd: {{members: 3}}`)"
        )),
        Target::Etcd(sel) => check_index(target, *sel, s.cluster.etcd.members).map(|m| {
            format!("{m}; the cluster runs {} (`cluster.etcd.members`)", plural(s.cluster.etcd.members, "etcd member"))
        }),
        Target::Component(c, sel) => match s.cluster.components.get(c) {
            None => Some(format!("target `{target}`: the cluster runs no {c}; expected a component listed under `cluster.components`")),
            Some(spec) => check_index(target, *sel, spec.replicas),
        },
        Target::Agent(name, sel) => match s.cluster.agents.iter().find(|a| &a.name == name) {
            None => {
                let known: Vec<String> = s.cluster.agents.iter().map(|a| format!("agent/{}", a.name)).collect();
                Some(if known.is_empty() {
                    format!("target `{target}`: no agent group `{name}`; expected an agent group defined under `cluster.agents` (there are none)")
                } else {
                    format!("target `{target}`: no agent group `{name}`; expected one of {}", ticked(&known))
                })
            }
            Some(a) if a.is_pods() && matches!(sel, Selector::Index(_)) => Some(format!(
                "target `{target}`: agent `{name}` is a pod agent, whose pods have names, not numbers; expected `agent/{name}` (its pods) or `agent/{name}/leader` (the pod holding its Lease)"
            )),
            Some(a) => check_index(target, *sel, a.replicas),
        },
    }
}

/// `3 API servers`, `1 etcd member`.
fn plural(n: u32, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

fn check_index(target: &Target, sel: Selector, replicas: u32) -> Option<String> {
    match sel {
        Selector::Index(i) if i >= replicas => Some(format!(
            "target `{target}`: replica {i} does not exist; expected 0 to {} (replicas count from 0)",
            replicas - 1
        )),
        _ => None,
    }
}

impl Scenario {
    /// Process names of the candidates for a Lease: `kube-scheduler-0`, `agent-1`, …
    pub(crate) fn candidates(&self, lease: &LeaseRef) -> Vec<String> {
        let mut out = Vec::new();
        for (c, spec) in &self.cluster.components {
            if &c.lease() == lease {
                out.extend((0..spec.replicas).map(|i| process_name(c.name(), i)));
            }
        }
        for a in &self.cluster.agents {
            if &a.lease == lease {
                out.extend((0..a.replicas).map(|i| process_name(&a.name, i)));
            }
        }
        out
    }
}

/// The process name of replica `i` of a group: `kube-scheduler-1`, `agent-0`, `node-2`.
pub fn process_name(group: &str, i: u32) -> String {
    format!("{group}-{i}")
}

/// Group names that agents may not take, because process names would collide.
pub(crate) const RESERVED_GROUPS: &[&str] = &[
    "kube-scheduler",
    "kube-controller-manager",
    "node",
    "api-server",
    "etcd",
    "kubechaos",
];

#[cfg(test)]
mod tests {
    use std::path::Path;

    fn problems(rest: &str) -> Vec<String> {
        let yaml = format!(
            "name: t\ncluster:\n  nodes: 1\n  components: {{kube-scheduler: {{replicas: 2}}}}\n  agents: [{{name: a, replicas: 1, lease: default/a}}]\n{rest}"
        );
        match crate::scenario::parse(Path::new("t.yaml"), yaml.as_bytes()) {
            Ok(_) => Vec::new(),
            Err(e) => e.to_string().lines().map(str::to_owned).collect(),
        }
    }

    #[test]
    fn a_valid_scenario_has_no_problem() {
        assert_eq!(
            problems("faults:\n  - {at: 10s, id: cut, partition: [agent/a/leader, api-server], for: 30s}\nexpect:\n  - leader-reacquired: {lease: default/a, within: 1m, after: cut}\n  - single-leader: {lease: kube-system/kube-scheduler}\n"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn for_only_where_the_step_can_be_undone() {
        let p = problems("faults:\n  - {at: 10s, kill: kube-scheduler/0, for: 5s}\n  - {at: 20s, api-server: restart, for: 5s}\n");
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].starts_with("t.yaml:7:5: `for` cannot undo `kill: kube-scheduler/0`; expected `for` only on api-server/etcd stop or crash, partition, delay, loss, api-errors and remove"), "{p:?}");
        assert!(
            p[1].starts_with("t.yaml:8:5: `for` cannot undo `api-server: restart`"),
            "{p:?}"
        );
    }

    #[test]
    fn targets_name_what_the_cluster_runs() {
        let p = problems("faults:\n  - {at: 1s, kill: kube-scheduler/2}\n  - {at: 2s, kill: agent/b}\n  - {at: 3s, remove: kube-controller-manager}\n  - {at: 4s, partition: [etcd, etcd]}\n");
        assert_eq!(p.len(), 4, "{p:?}");
        assert!(
            p[0].contains(
                ":7:20: target `kube-scheduler/2`: replica 2 does not exist; expected 0 to 1"
            ),
            "{p:?}"
        );
        assert!(
            p[1].contains(":8:20: target `agent/b`: no agent group `b`"),
            "{p:?}"
        );
        assert!(
            p[2].contains(
                "target `kube-controller-manager`: the cluster runs no kube-controller-manager"
            ),
            "{p:?}"
        );
        assert!(
            p[3].contains(
                "`partition` cuts `etcd` off from itself; expected two different targets"
            ),
            "{p:?}"
        );
    }

    /// `after: ID.end` anchors at the moment the step's `for:` undoes it; a step without `for:`
    /// has no end, which is said at the invariant's line.
    #[test]
    fn an_anchor_at_a_steps_end_needs_a_for() {
        let p = problems("faults:\n  - {at: 10s, id: outage, api-server: stop, for: 45s}\n  - {at: 1m30s, id: kill, kill: kube-scheduler/leader}\nexpect:\n  - schedulable: {within: 1m, after: outage.end}\n  - schedulable: {within: 1m, after: kill.end}\n  - schedulable: {within: 1m, after: nowhere.end}\n");
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(
            p[0].contains(":11:5: `after: kill.end`: step `kill` has no `for:`, so nothing ends it; expected `after: kill`"),
            "{p:?}"
        );
        assert!(
            p[1].contains(":12:5: `after: nowhere.end` names no step"),
            "{p:?}"
        );
        let s = crate::scenario::parse(
            std::path::Path::new("t.yaml"),
            b"name: t\ncluster: {components: {kube-scheduler: {replicas: 1}}}\nfaults:\n  - {at: 10s, id: outage, api-server: stop, for: 45s}\nexpect:\n  - schedulable: {within: 1m, after: outage}\n  - schedulable: {within: 1m, after: outage.end}\n",
        )
        .unwrap();
        let anchors: Vec<std::time::Duration> = s
            .expect
            .iter()
            .map(|i| s.planned_anchor(&i.value))
            .collect();
        assert_eq!(
            anchors,
            [
                std::time::Duration::from_secs(10),
                std::time::Duration::from_secs(55)
            ]
        );
    }

    #[test]
    fn invariants_judge_held_leases_and_anchor_to_existing_steps() {
        let p = problems("expect:\n  - leader-reacquired: {lease: default/b, within: 1m}\n  - schedulable: {within: 1m, after: nowhere}\n");
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].contains(":7:5: `leader-reacquired` judges lease `default/b`, which no component or agent holds"), "{p:?}");
        assert!(
            p[1].contains(":8:5: `after: nowhere` names no step"),
            "{p:?}"
        );
    }

    #[test]
    fn process_names_are_group_and_replica() {
        assert_eq!(super::process_name("kube-scheduler", 1), "kube-scheduler-1");
    }
}

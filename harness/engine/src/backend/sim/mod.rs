//! The simulated cluster: a turmoil simulation in which every component talks HTTP to a
//! simulated API server through a real kube-rs `Client`.
//!
//! Hosts: `api-server`, `etcd` (its availability gates the API server), one per component
//! replica (`kube-scheduler-0`, …), one per agent replica, one per fake node (`node-0`, …), and
//! `kubechaos` (the observer). The shared [`Driver`] applies the plan at its virtual times and
//! supervises processes like the kubelet does for static pods; this module supplies the world:
//! turmoil hosts (crash and bounce), links (one-way partitions), and whether the API server can
//! reach etcd.
//!
//! A run is a pure function of (scenario, seed, version): every source of randomness is seeded
//! (turmoil's network, the electors' jitter), maps iterate in order, and time is virtual.

pub mod apiserver;
pub mod controller_manager;
pub mod net;
pub mod node;
pub mod process;
pub mod scheduler;
pub mod store;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use tokio::sync::mpsc;

use self::apiserver::ApiServer;
use self::net::SimTransport;
use self::process::{Proc, RecorderReporter};
use self::store::{Store, LEASES};
use super::driver::{Exit, World, WorldClock};
use super::link::LinkState;
use super::{BackendError, EnvironmentError};
use crate::clock::{Clock, SimClock};
use crate::observer::{Command, Observer};
use crate::run::{Backend, Ready};
use kubechaos_core::events::Recorder;
use kubechaos_core::plan::Plan;
use kubechaos_core::report::live::Progress;
use kubechaos_core::scenario::validate::process_name;
use kubechaos_core::scenario::{AgentMode, ApiErrors, LeaseRef, Pos, Scenario};

/// Default virtual milliseconds per simulation step (see [`SimOptions::tick`]).
pub const DEFAULT_TICK_MS: u64 = 10;

/// Options of a simulated run.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// Seeds every random choice. Same seed, same run.
    pub seed: u64,
    /// Virtual time per simulation step. Default 10ms: network messages and timers resolve at
    /// this granularity, and each message takes at least one step, so the step also sets a
    /// request's round trip and with it a leader's renew period (the retry period plus a
    /// round trip: 2.03 s at 10ms, 2.06 s at 20ms; upstream's measured 2.015 s on the local
    /// backend). Over the run-up to a fault that period decides where a leader's last renewal
    /// falls, and so whether a candidate takes over at once or waits out a lease.
    pub tick: Duration,
    /// Which of these the scenario's own `sim:` settings replace, where it has them (what the
    /// command line did not set).
    pub from_file: FromFile,
}

/// Which options a scenario's `sim:` settings may set.
#[derive(Clone, Copy, Debug, Default)]
pub struct FromFile {
    /// `sim.seed`.
    pub seed: bool,
    /// `sim.step`.
    pub step: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            seed: 1,
            tick: Duration::from_millis(DEFAULT_TICK_MS),
            from_file: FromFile::default(),
        }
    }
}

impl SimOptions {
    /// The options of a run of `s`: its `sim:` settings where they may apply.
    pub fn for_scenario(&self, s: &Scenario) -> SimOptions {
        SimOptions {
            seed: s
                .sim
                .seed
                .filter(|_| self.from_file.seed)
                .unwrap_or(self.seed),
            tick: s
                .sim
                .step
                .filter(|_| self.from_file.step)
                .unwrap_or(self.tick),
            from_file: self.from_file,
        }
    }
}

/// The simulated wall-clock time at the start of every run.
pub fn epoch() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().expect("valid epoch")
}

/// What only the sim cannot do, with where the scenario asks for it (what neither backend that
/// builds its own cluster can do is in `built_cluster_check`).
pub(crate) fn check(s: &Scenario) -> Vec<(Pos, String)> {
    let mut problems: Vec<(Pos, String)> = s.cluster
        .agents
        .iter()
        .filter_map(|a| {
            if a.command.is_some() {
                Some((a.pos, format!("agent `{}` runs a `command`; the sim can only run the reference agent (`mode:`); run your own program with `--backend local`", a.name)))
            } else if a.is_pods() {
                Some((a.pos, format!("agent `{}` is a pod agent (`pods`); the sim runs no software of yours, only the reference agent (`mode:`); run your pods with `--backend local` (from `cluster.manifests`) or `--backend kube`", a.name)))
            } else {
                None
            }
        })
        .collect();
    problems.extend(s.cluster.manifests.iter().map(|m| (m.pos, format!("`cluster.manifests` ({}): the sim runs no manifests; expected `--backend local` (it applies them and runs each pod's `command` on this machine) or `--backend kube` (it creates them and deletes them at the end)", m.written))));
    use kubechaos_core::scenario::Target;
    for step in &s.faults {
        if let Some(link) = step.action.link() {
            if matches!((&link.a, &link.b), (Target::Etcd(_), Target::Etcd(_))) {
                problems.push((step.pos, format!("`{}` between etcd members: the sim does not model raft's traffic between members (a member is up or down); expected a fault between API servers and etcd (`partition: [api-server/1, etcd]`) or on members (`remove: etcd/1`)", step.action)));
            }
        }
    }
    problems
}

/// The simulated world: turmoil hosts and links, and etcd's reachability from the API server.
pub(crate) struct SimWorld<'a> {
    sim: turmoil::Sim<'a>,
    /// Virtual milliseconds since the simulation began, as the driver last saw them (what the
    /// recorder stamps events recorded outside a host with).
    now_ms: Arc<AtomicU64>,
    /// When time zero of the run was (after a self-hosted bootstrap; otherwise the start).
    zero: Duration,
    /// The pods' containers, on every node.
    containers: Arc<node::SimContainers>,
    store: Arc<Mutex<Store>>,
    /// The etcd members, and which are up.
    etcd: Vec<(String, bool)>,
    /// The member leading raft, while there is a quorum and none is being elected.
    etcd_leader: Option<usize>,
    /// While several members elect a leader: when (simulation time) one is elected.
    election: Option<Duration>,
    /// Draws of election times.
    etcd_rng: crate::clock::Rng,
    /// Each API server's etcd client.
    apis: Vec<EtcdClient>,
    /// Since when (simulation time) each (API server, member) connection has been held by a
    /// cut, until its keepalive gives it up ([`ETCD_KEEPALIVE`]).
    etcd_held: std::collections::BTreeMap<(String, String), Duration>,
    /// When the next held connection's keepalive gives it up.
    etcd_wake: Option<Duration>,
    /// The API servers behind their one address.
    balancer: Arc<net::Balancer>,
    /// Cuts, delays, losses and API errors, shared with the API server.
    degraded: Arc<Mutex<apiserver::Degraded>>,
    /// Told when a link changes.
    links_changed: Arc<tokio::sync::Notify>,
    commands: mpsc::UnboundedSender<Command>,
}

/// An API server's etcd client, as the simulation driver sets it and the API server uses it.
pub(crate) struct EtcdClient {
    /// The API server's name.
    name: String,
    /// It reaches an etcd quorum with a leader through a member it is connected to: requests are
    /// served (see [`ApiServer`]).
    ok: Arc<AtomicBool>,
    /// And one of those connections answers (`/readyz`'s etcd check passes): what the balancer
    /// in front of the observer asks.
    ready: Arc<AtomicBool>,
    /// The members it is connected to, in order: it sends each request to the next one.
    members: Arc<Mutex<Vec<String>>>,
}

/// How long after a cut stops every byte between an API server and an etcd member its etcd
/// client gives the connection up: kube-apiserver's gRPC keepalive to etcd pings after 30 s
/// without a byte received and waits 10 s for the answer. Until then the connection is up as far
/// as the client knows, and each request sent over it waits for the cut to heal.
pub(crate) const ETCD_KEEPALIVE: Duration = Duration::from_secs(40);

impl SimWorld<'_> {
    /// After a member or a link changed, an election's time came, or a held connection's
    /// keepalive ran out: whether there is a quorum (more than half the members up), who leads
    /// raft, and for each API server the members its etcd client is connected to and whether
    /// it reaches a quorum with a leader through them.
    ///
    /// kube-apiserver's etcd client (clientv3: one gRPC connection to each endpoint in
    /// `--etcd-servers`, requests balanced round robin over those that are connected) loses the
    /// connection to a member that is down (refused) or behind a cut that resets at once, and
    /// sends nothing there. A cut that only stops the bytes is not seen: the connection stays
    /// up, and every request the balancer sends over it waits for the cut to heal, until the
    /// keepalive gives it up ([`ETCD_KEEPALIVE`]); the requests then waiting fail. So one member
    /// cut off from an API server stalls about one request in N through it, where a member that
    /// is down stalls none. The leader keeps leading while it is up and there
    /// is a quorum. Without one (the leader gone, or the quorum just back), several members
    /// first elect one, as raft does: the survivors notice when their randomized election
    /// timeout runs out ([`election_time`]), and until then nothing is written or read through
    /// etcd (requests wait, see [`ApiServer`]); then the first member that is up leads. One
    /// member leads itself at once (etcd's single-member start).
    fn update_etcd(&mut self) {
        let now = self.sim.elapsed();
        let up = self.etcd.iter().filter(|(_, up)| *up).count();
        let quorum = up * 2 > self.etcd.len();
        let leading = self.etcd_leader.is_some_and(|l| self.etcd[l].1);
        let first_up = self.etcd.iter().position(|(_, up)| *up);
        if !quorum {
            self.etcd_leader = None;
            self.election = None;
        } else if !leading {
            self.etcd_leader = None;
            if self.etcd.len() == 1 {
                self.etcd_leader = first_up;
            } else {
                match self.election {
                    Some(at) if now >= at => {
                        self.election = None;
                        self.etcd_leader = first_up;
                    }
                    Some(_) => {}
                    None => self.election = Some(now + election_time(&mut self.etcd_rng, up)),
                }
            }
        }
        let elected = self.etcd_leader.is_some();
        let degraded = self.degraded.lock().expect("degraded");
        let link = |from: &String, to: &String| degraded.links.get(&(from.clone(), to.clone()));
        let mut held = std::collections::BTreeMap::new();
        self.etcd_wake = None;
        for client in &self.apis {
            let api = &client.name;
            let mut connected = Vec::new();
            let mut answering = false;
            for (m, up) in &self.etcd {
                let (there, back) = (link(api, m), link(m, api));
                let reset = [there, back].iter().any(|l| l.is_some_and(|l| l.reset));
                let cut = [there, back].iter().any(|l| l.is_some_and(|l| l.cut));
                if !*up || reset {
                    continue;
                }
                if cut {
                    let key = (api.clone(), m.clone());
                    let since = self.etcd_held.get(&key).copied().unwrap_or(now);
                    held.insert(key, since);
                    let gone = since + ETCD_KEEPALIVE;
                    if now >= gone {
                        continue;
                    }
                    self.etcd_wake = Some(self.etcd_wake.map_or(gone, |w| w.min(gone)));
                } else {
                    answering = true;
                }
                connected.push(m.clone());
            }
            let ok = quorum && elected && !connected.is_empty();
            client.ok.store(ok, Ordering::SeqCst);
            client.ready.store(ok && answering, Ordering::SeqCst);
            *client.members.lock().expect("etcd members") = connected;
        }
        drop(degraded);
        self.etcd_held = held;
        // Requests waiting for etcd look again.
        self.links_changed.notify_waiters();
    }

    fn is_api_server(&self, name: &str) -> bool {
        self.apis.iter().any(|c| c.name == name)
    }

    fn etcd_index(&self, name: &str) -> Option<usize> {
        self.etcd.iter().position(|(m, _)| m == name)
    }

    fn is_etcd_link(&self, from: &str, to: &str) -> bool {
        (self.etcd_index(from).is_some() && self.is_api_server(to))
            || (self.is_api_server(from) && self.etcd_index(to).is_some())
    }
}

impl WorldClock for SimWorld<'_> {
    fn now(&mut self) -> Duration {
        let elapsed = self.sim.elapsed();
        self.now_ms
            .store(elapsed.as_millis() as u64, Ordering::SeqCst);
        elapsed.saturating_sub(self.zero)
    }

    fn advance(&mut self) -> Result<(), BackendError> {
        let now = self.sim.elapsed();
        if self.election.is_some_and(|at| now >= at) || self.etcd_wake.is_some_and(|at| now >= at) {
            self.update_etcd();
        }
        self.sim
            .step()
            .map(|_| ())
            .map_err(|e| EnvironmentError::Simulation(e.to_string()).into())
    }

    fn real_time(&self) -> bool {
        false
    }
}

impl World for SimWorld<'_> {
    fn clock(&mut self) -> &mut dyn WorldClock {
        self
    }

    fn stop(&mut self, name: &str, _graceful: bool, _hold: crate::backend::driver::Hold) {
        // turmoil has one way to stop a host; in-flight requests die with it either way.
        self.sim.crash(name);
        self.containers.node_stopped(name);
        self.balancer.set_up(name, false);
        if let Some(i) = self.etcd_index(name) {
            self.etcd[i].1 = false;
            self.update_etcd();
        }
    }

    fn start(&mut self, name: &str) {
        self.sim.bounce(name);
        self.balancer.set_up(name, true);
        if let Some(i) = self.etcd_index(name) {
            self.etcd[i].1 = true;
            self.update_etcd();
        }
    }

    fn etcd_leader(&mut self) -> Option<String> {
        self.etcd_leader.map(|l| self.etcd[l].0.clone())
    }

    fn exited(&mut self, name: &str) -> Option<Exit> {
        (!self.sim.is_host_running(name)).then_some(Exit::Recorded)
    }

    /// kubeadm's liveness probe of an API server: `/livez` passes while one of its etcd
    /// client's connections answers (its `etcd` check, as `/readyz`'s).
    fn alive(&mut self, name: &str) -> Option<bool> {
        self.apis
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.ready.load(Ordering::SeqCst))
    }

    /// The API server is one end of every link that carries traffic: it holds, resets or slows
    /// what crosses it (`apiserver::Degraded`). A cut between it and etcd makes etcd
    /// unreachable.
    fn link(&mut self, from: &str, to: &str, state: &LinkState) {
        let key = (from.to_owned(), to.to_owned());
        {
            let mut degraded = self.degraded.lock().expect("degraded");
            if *state == LinkState::default() {
                degraded.links.remove(&key);
            } else {
                degraded.links.insert(key, state.clone());
            }
        }
        if self.is_etcd_link(from, to) {
            self.update_etcd();
        }
        self.links_changed.notify_waiters();
    }

    fn api_errors(&mut self, active: &[(usize, ApiErrors)]) {
        self.degraded.lock().expect("degraded").errors = active.to_vec();
    }

    fn lease_identity(&mut self, lease: &LeaseRef) -> Option<String> {
        let store = self.store.lock().expect("store lock");
        store
            .get(&LEASES, &lease.namespace, &lease.name)
            .and_then(|l| l.pointer("/spec/holderIdentity"))
            .and_then(|h| h.as_str())
            .filter(|h| !h.is_empty())
            .map(str::to_owned)
    }

    fn command(&mut self, c: Command) {
        let _ = self.commands.send(c);
    }

    fn containers(
        &mut self,
        group: &crate::fake_node::PodGroup,
        only: Option<&str>,
        op: crate::fake_node::ContainerOp,
    ) -> Vec<String> {
        self.containers.act(group, only, op)
    }

    fn pods(&mut self, _: &crate::fake_node::PodGroup) -> Vec<String> {
        // The sim's check refuses pod agents; a self-hosted component is never partitioned.
        Vec::new()
    }
}

/// Play a validated scenario on a fresh simulated cluster with `seed` (the default step) and
/// judge it.
pub fn run(s: &Scenario, seed: u64) -> Result<crate::run::Outcome, BackendError> {
    let mut sim = Sim::new(SimOptions {
        seed,
        ..Default::default()
    });
    crate::run::run(s, &mut sim, &mut |_: &str| {})
}

/// The simulated cluster as a backend: a fresh simulation for each run.
#[derive(Debug, Default)]
pub struct Sim {
    opts: SimOptions,
    /// Virtual milliseconds: now (as the driver last saw it), and when time zero of the run was
    /// (after the bootstrap of a self-hosted control plane; otherwise the start).
    now_ms: Arc<AtomicU64>,
    zero_ms: Arc<AtomicU64>,
}

impl Sim {
    /// A simulated cluster with these options.
    pub fn new(opts: SimOptions) -> Sim {
        Sim {
            opts,
            ..Default::default()
        }
    }
}

impl Backend for Sim {
    type World = SimWorld<'static>;

    fn name(&self) -> &'static str {
        "sim"
    }

    fn seed(&self, s: &Scenario) -> u64 {
        self.opts.for_scenario(s).seed
    }

    fn check(&self, s: &Scenario) -> Vec<(Pos, String)> {
        let mut problems = super::built_cluster_check(s, "sim");
        problems.extend(check(s));
        problems
    }

    fn via(&self) -> String {
        "the simulation".into()
    }

    fn describe(&self, action: &kubechaos_core::scenario::Action) -> (String, String) {
        crate::backend::Means {
            stop: "crash the turmoil host of",
            kill: "crash the turmoil host of",
            cut: "the simulated API server holds what crosses the link (a reset partition ends each connection)",
            slow: "the simulated API server",
            errors: "the simulated API server",
        }
        .describe(action)
    }

    fn recorder(&mut self) -> Recorder {
        // A run of its own: fresh clocks.
        self.now_ms = Arc::default();
        self.zero_ms = Arc::default();
        let (driver_now, zero) = (self.now_ms.clone(), self.zero_ms.clone());
        Recorder::new(move || {
            turmoil::sim_elapsed()
                .map(|d| d.as_millis() as u64)
                .unwrap_or_else(|| driver_now.load(Ordering::SeqCst))
                .saturating_sub(zero.load(Ordering::SeqCst))
        })
    }

    fn start(
        &mut self,
        s: &Scenario,
        plan: &Plan,
        recorder: &Recorder,
        _: &mut dyn Progress,
    ) -> Result<Ready<SimWorld<'static>>, BackendError> {
        let opts = self.opts.for_scenario(s);
        start(s, plan, &opts, recorder, &self.now_ms, &self.zero_ms)
    }

    fn finish(
        &mut self,
        _: SimWorld<'static>,
        _: Duration,
        _: &mut dyn Progress,
    ) -> Result<String, BackendError> {
        Ok("the simulation ended".into())
    }
}

/// A fresh simulated cluster for a validated scenario, bootstrapped (self-hosted) and observed.
fn start(
    s: &Scenario,
    plan: &Plan,
    opts: &SimOptions,
    recorder: &Recorder,
    now_ms: &Arc<AtomicU64>,
    zero_ms: &Arc<AtomicU64>,
) -> Result<Ready<SimWorld<'static>>, BackendError> {
    let mut sim = turmoil::Builder::new()
        .simulation_duration(plan.duration + Duration::from_secs(3600))
        .tick_duration(opts.tick)
        .min_message_latency(Duration::from_millis(1))
        .max_message_latency(Duration::from_millis(10))
        .rng_seed(opts.seed)
        .build();

    let clock: Arc<dyn Clock> = Arc::new(SimClock { epoch: epoch() });
    let store = Arc::new(Mutex::new(Store::default()));
    let proc_of = |name: &str| Proc::new(name, recorder.clone(), clock.clone(), opts.seed);
    let mut names = Vec::new();

    // etcd: processes whose only effect is whether the API servers reach a quorum.
    for member in s.cluster.etcd_names() {
        let p = proc_of(&member);
        sim.host(member.clone(), move || {
            let p = p.clone();
            async move {
                p.start();
                std::future::pending::<()>().await;
                Ok(())
            }
        });
        names.push(member);
    }

    let degraded = Arc::new(Mutex::new(apiserver::Degraded::new(opts.seed)));
    let links_changed = Arc::new(tokio::sync::Notify::new());
    let writes = Arc::new(tokio::sync::Notify::new());
    let mut apis = Vec::new();
    for name in s.cluster.api_server_names() {
        let etcd_ok = Arc::new(AtomicBool::new(true));
        let etcd_ready = Arc::new(AtomicBool::new(true));
        let members = Arc::new(Mutex::new(s.cluster.etcd_names()));
        let api = Arc::new(
            ApiServer::new(
                store.clone(),
                etcd_ok.clone(),
                clock.clone(),
                degraded.clone(),
                links_changed.clone(),
            )
            .named(&name, members.clone(), etcd_ready.clone(), writes.clone()),
        );
        let api_proc = proc_of(&name);
        sim.host(name.clone(), move || {
            let p = api_proc.clone();
            let api = api.clone();
            async move {
                p.start();
                if !api.storage_ready().await {
                    p.exit(apiserver::STORAGE_START_FAILED);
                    return Ok(());
                }
                api.serve().await
            }
        });
        apis.push(EtcdClient {
            name: name.clone(),
            ok: etcd_ok,
            ready: etcd_ready,
            members,
        });
        names.push(name);
    }
    let balancer = Arc::new(net::Balancer::new(
        s.cluster.api_server_names(),
        apis.iter().map(|c| c.ready.clone()).collect(),
    ));
    net::set_balancer(balancer.clone());

    let containers = {
        let (recorder, clock, seed) = (recorder.clone(), clock.clone(), opts.seed);
        Arc::new(node::SimContainers::new(move |name| {
            Proc::new(name, recorder.clone(), clock.clone(), seed)
        }))
    };
    for i in 0..s.cluster.nodes {
        let p = proc_of(&process_name("node", i));
        names.push(p.name.clone());
        let containers = containers.clone();
        sim.host(p.name.clone(), move || {
            let p = p.clone();
            let containers = containers.clone();
            async move {
                node::run(p, containers).await;
                Ok(())
            }
        });
    }
    // Self-hosted: the components are pods of Deployments, run by the nodes (see `bootstrap`).
    let static_components = if s.cluster.self_hosted {
        BTreeMap::new()
    } else {
        s.cluster.components.clone()
    };
    for (component, spec) in &static_components {
        for i in 0..spec.replicas {
            let p = proc_of(&process_name(component.name(), i));
            names.push(p.name.clone());
            let component = *component;
            sim.host(p.name.clone(), move || {
                let p = p.clone();
                async move {
                    match component {
                        kubechaos_core::scenario::Component::KubeScheduler => {
                            scheduler::run(p).await
                        }
                        kubechaos_core::scenario::Component::KubeControllerManager => {
                            controller_manager::run(p).await
                        }
                    }
                    Ok(())
                }
            });
        }
    }
    for group in &s.cluster.agents {
        for i in 0..group.replicas {
            let p = proc_of(&process_name(&group.name, i));
            names.push(p.name.clone());
            let lease = group.lease.clone();
            let mode = group.mode.unwrap_or(AgentMode::Correct);
            sim.host(p.name.clone(), move || {
                let p = p.clone();
                let lease = lease.clone();
                async move {
                    let inc = p.start();
                    let note_proc = p.clone();
                    crate::agent::run(crate::agent::AgentParams {
                        client: p.client(),
                        namespace: lease.namespace.clone(),
                        name: lease.name.clone(),
                        identity: p.identity(inc),
                        mode,
                        exit_on_loss: false,
                        clock: p.clock.clone(),
                        rng: p.rng(inc),
                        reporter: Arc::new(RecorderReporter(p.recorder.clone())),
                        note: Box::new(move |m| note_proc.note(m)),
                    })
                    .await;
                    Ok(())
                }
            });
        }
    }

    // Until the cluster is up and ready, everything happens at time zero.
    zero_ms.store(u64::MAX, Ordering::SeqCst);
    let zero = come_up(&mut sim, s)?;
    zero_ms.store(zero.as_millis() as u64, Ordering::SeqCst);
    let zero = Duration::from_millis(zero_ms.load(Ordering::SeqCst));
    let run_epoch = epoch()
        .checked_add(k8s_openapi::jiff::SignedDuration::from_millis(
            zero.as_millis() as i64,
        ))
        .expect("epoch in range");

    let (tx, rx) = mpsc::unbounded_channel();
    let rx = std::cell::RefCell::new(Some(rx));
    // The sim's network carries each exchange whole within a client's timeout: short watches.
    let observer = Observer {
        watch_timeout: apiserver::WATCH_MAX.as_secs() as u32,
        ..Observer::of(s, recorder.clone(), run_epoch)
    };
    sim.host("kubechaos", move || {
        let rx = rx
            .borrow_mut()
            .take()
            .expect("the observer host is never restarted");
        let obs = observer.clone();
        async move {
            obs.run(SimTransport::client(process::REQUEST_TIMEOUT), rx)
                .await;
            Ok(())
        }
    });

    let world = SimWorld {
        sim,
        now_ms: now_ms.clone(),
        zero,
        containers,
        store,
        etcd: s
            .cluster
            .etcd_names()
            .into_iter()
            .map(|m| (m, true))
            .collect(),
        etcd_leader: Some(0),
        election: None,
        etcd_rng: crate::clock::Rng::new(opts.seed, "etcd-election"),
        apis,
        etcd_held: Default::default(),
        etcd_wake: None,
        balancer,
        degraded,
        links_changed,
        commands: tx,
    };
    Ok(Ready {
        world,
        processes: names,
    })
}

/// How long a raft election among `voters` surviving members takes after the leader is gone (or
/// the quorum is back), as etcd's defaults (`--heartbeat-interval` 100 ms, `--election-timeout`
/// 1 s) make it: each member's election timer, reset by the last heartbeat (up to 100 ms
/// before), runs out after a randomized timeout in [1 s, 2 s) (raft's
/// `randomizedElectionTimeout`); the first to run out wins its (pre-)vote, the messages taking
/// a few milliseconds. Measured on the local control plane (v3.6.16, three members, the leader
/// removed): the probe pod bound 1.3 s after the removal.
fn election_time(rng: &mut crate::clock::Rng, voters: usize) -> Duration {
    let first = (0..voters.max(1))
        .map(|_| 1.0 + rng.next_f64())
        .fold(f64::MAX, f64::min);
    let since_heartbeat = 0.1 * rng.next_f64();
    Duration::from_secs_f64(first - since_heartbeat)
}

/// How long (virtual) the bootstrap of a self-hosted control plane may take.
pub(crate) const BOOTSTRAP_LIMIT: Duration = Duration::from_secs(300);

/// Bring the cluster up as the local backend does, stepping the simulation until it is: a
/// self-hosted control plane first ([`crate::selfhosted::bootstrap`], from a `bootstrap` host),
/// then, polled every [`crate::kubeclient::READY_POLL`], until every Lease is held and every node
/// Ready ([`crate::kubeclient::not_ready`]). Returns the virtual time it was found ready: time
/// zero of the run (what happened before is stamped zero, as on the local backend). The
/// components' renew cycles thus stand in the same relation to the scenario's times as on a
/// real control plane: a leader's last renewal before a fault at a whole second falls wherever
/// its start-up put it, not always just after its first try at time zero.
fn come_up(sim: &mut turmoil::Sim<'_>, s: &Scenario) -> Result<Duration, BackendError> {
    type Done = Option<Result<(), crate::selfhosted::BootstrapError>>;
    let done: Arc<Mutex<Done>> = Arc::default();
    let result = done.clone();
    let components: BTreeMap<kubechaos_core::scenario::Component, u32> = s
        .cluster
        .components
        .iter()
        .map(|(c, spec)| (*c, spec.replicas))
        .collect();
    let mut leases: Vec<LeaseRef> = components
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(c, _)| c.lease())
        .collect();
    leases.extend(s.cluster.agents.iter().map(|a| a.lease.clone()));
    let (nodes, self_hosted) = (s.cluster.nodes, s.cluster.self_hosted);
    sim.host("bootstrap", move || {
        let (result, components, leases) = (result.clone(), components.clone(), leases.clone());
        async move {
            let client = SimTransport::client(process::REQUEST_TIMEOUT);
            let started = tokio::time::Instant::now();
            let mut r = if self_hosted {
                crate::selfhosted::bootstrap(&client, &components, nodes, BOOTSTRAP_LIMIT, &|_| {})
                    .await
            } else {
                Ok(())
            };
            while r.is_ok() {
                let missing = crate::kubeclient::not_ready(&client, &leases, nodes).await;
                if missing.is_empty() {
                    break;
                }
                if started.elapsed() > BOOTSTRAP_LIMIT {
                    r = Err(crate::selfhosted::BootstrapError::NotReady {
                        limit: BOOTSTRAP_LIMIT,
                        missing,
                    });
                    break;
                }
                tokio::time::sleep(crate::kubeclient::READY_POLL).await;
            }
            *result.lock().expect("bootstrap result") = Some(r);
            std::future::pending::<()>().await;
            Ok(())
        }
    });
    loop {
        if let Some(r) = done.lock().expect("bootstrap result").take() {
            return r
                .map(|()| sim.elapsed())
                .map_err(|e| EnvironmentError::SimStart(e).into());
        }
        sim.step()
            .map_err(|e| EnvironmentError::Simulation(e.to_string()))?;
    }
}

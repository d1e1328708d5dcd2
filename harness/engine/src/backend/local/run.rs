//! Playing a scenario on the local control plane: the shared [`Driver`] carries out the plan in
//! real time on [`LocalWorld`] (child processes, in-process fake nodes, per-client proxies), the
//! same [`Observer`] as the sim's watches the API server, and the processes' own words (upstream
//! klog lines, the agents' JSON lines) become leadership events.
//!
//! Time zero is the moment the cluster is ready (every lease held, every node Ready); events are
//! stamped with real milliseconds since then.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::cluster::{Hooks, LocalCluster, Spec};
use crate::backend::driver::{Driver, Exit, World, API_SERVER, ETCD};
use crate::backend::realtime::{self, Interrupt};
use crate::backend::BackendError;
use crate::observer::{Command, Observer};
use kubechaos_core::events::{fmt_ms, identity_process, Event, EventKind, Recorder};
use kubechaos_core::plan::Plan;
use kubechaos_core::scenario::{LeaseRef, Scenario};

/// Options of a local run.
#[derive(Clone, Debug, Default)]
pub struct LocalOptions {
    /// Keep the run directory (certificates, kubeconfigs, logs, etcd data) afterwards.
    pub keep: bool,
}

/// Turns what processes print into events: upstream's leader-election log lines
/// (`k8s.io/client-go/tools/leaderelection`, v0.37) and the agents' JSON lines
/// ([`JsonLinesReporter`](crate::agent::JsonLinesReporter)).
pub struct RecorderHooks(pub Recorder);

/// The `lock="NS/NAME"` value of a klog line.
fn klog_lock(line: &str) -> Option<&str> {
    let rest = &line[line.find("lock=\"")? + 6..];
    Some(&rest[..rest.find('"')?])
}

impl Hooks for RecorderHooks {
    fn started(&self, process: &str, incarnation: u32) {
        self.0.record(EventKind::ProcessStarted {
            process: process.to_owned(),
            incarnation,
        });
    }

    fn exited(&self, process: &str, reason: &str) {
        self.0.record(EventKind::ProcessExited {
            process: process.to_owned(),
            reason: reason.to_owned(),
        });
    }

    fn line(&self, process: &str, incarnation: u32, line: &str) {
        let identity = || format!("{process}_{incarnation}");
        if line.starts_with('{') {
            match serde_json::from_str::<EventKind>(line) {
                Ok(e @ (EventKind::LeadingStarted { .. } | EventKind::LeadingStopped { .. })) => {
                    self.0.record(e)
                }
                Ok(EventKind::ProcessNote { message, .. }) => {
                    self.0.record(EventKind::ProcessNote {
                        process: process.to_owned(),
                        message,
                    })
                }
                _ => {}
            }
        } else if line.contains("\"Successfully acquired lease\"") {
            if let Some(lock) = klog_lock(line) {
                self.0.record(EventKind::LeadingStarted {
                    lease: lock.to_owned(),
                    identity: identity(),
                });
            }
        } else if line.contains("\"Failed to renew lease\"") {
            if let Some(lock) = klog_lock(line) {
                self.0.record(EventKind::LeadingStopped {
                    lease: lock.to_owned(),
                    identity: identity(),
                    reason: "failed to renew the lease within the renew deadline (from its log)"
                        .into(),
                });
            }
        }
    }
}

/// The local world: what the driver does to processes and links, done to real ones.
struct LocalWorld {
    cluster: LocalCluster,
    rt: tokio::runtime::Handle,
    recorder: Recorder,
    commands: mpsc::UnboundedSender<Command>,
    /// Processes that could not be started, and why.
    failed: BTreeMap<String, String>,
}

impl LocalWorld {
    /// Cut or mend one direction. Traffic flows only between the API server and its clients
    /// (through each client's proxy) and between the API server and etcd (through the API
    /// server's); any other pair exchanges nothing, so there is nothing to cut.
    fn link(&self, from: &str, to: &str, cut: bool) {
        let proxy = |name: &str| self.cluster.proxy(name);
        match (from, to) {
            (API_SERVER, ETCD) => proxy(API_SERVER).map(|p| p.set_up(cut)),
            (ETCD, API_SERVER) => proxy(API_SERVER).map(|p| p.set_down(cut)),
            (client, API_SERVER) => proxy(client).map(|p| p.set_up(cut)),
            (API_SERVER, client) => proxy(client).map(|p| p.set_down(cut)),
            _ => None,
        };
    }
}

impl World for LocalWorld {
    fn stop(&mut self, name: &str, graceful: bool, _hold: bool) {
        self.cluster.stop(name, graceful);
    }

    fn start(&mut self, name: &str) {
        if let Err(e) = self.cluster.start(name) {
            self.failed.insert(name.to_owned(), e);
        }
    }

    fn exited(&mut self, name: &str) -> Option<Exit> {
        if let Some(e) = self.failed.remove(name) {
            return Some(Exit::Unrecorded(format!("could not start: {e}")));
        }
        self.cluster.exited(name).map(Exit::Unrecorded)
    }

    fn cut(&mut self, from: &str, to: &str) {
        self.link(from, to, true);
    }

    fn mend(&mut self, from: &str, to: &str) {
        self.link(from, to, false);
    }

    /// Read from the API server; when it does not answer (it may be the thing that is down),
    /// the holder the observer saw last.
    fn lease_holder(&mut self, lease: &LeaseRef) -> Option<String> {
        let client = self.cluster.admin.clone();
        let read = self.rt.block_on(async {
            tokio::time::timeout(
                Duration::from_secs(2),
                crate::kubeclient::lease_holder(&client, lease),
            )
            .await
        });
        let holder = match read {
            Ok(Ok(found)) => found,
            _ => {
                let key = lease.to_string();
                self.recorder
                    .snapshot()
                    .into_iter()
                    .rev()
                    .find_map(|e| match e.kind {
                        EventKind::LeaseObserved {
                            lease: l, holder, ..
                        } if l == key => Some(holder),
                        _ => None,
                    })
                    .flatten()
            }
        };
        holder.map(|h| identity_process(&h).to_owned())
    }

    fn command(&mut self, c: Command) {
        let _ = self.commands.send(c);
    }

    fn containers(
        &mut self,
        c: kubechaos_core::scenario::Component,
        only: Option<&str>,
        op: crate::fake_node::ContainerOp,
    ) -> Vec<String> {
        self.cluster.containers.act(c, only, op)
    }
}

/// Play a validated scenario's plan on a local control plane started for it. Returns the
/// recorded timeline. Everything started is stopped before this returns, whatever happens
/// (a panic included: dropping the cluster kills its process groups).
pub fn run(
    s: &Scenario,
    plan: &Plan,
    opts: &LocalOptions,
    progress: &mut dyn kubechaos_core::report::live::Progress,
) -> Result<Vec<Event>, BackendError> {
    let rt = realtime::runtime()?;
    // Children are started from this thread (their parent-death signal follows it), with the
    // runtime entered so that their output pumps and the fake nodes run on its workers.
    let _entered = rt.enter();

    let (recorder, zero) = realtime::recorder("local", s, plan);
    let interrupt = Interrupt::listen(&rt);
    let mut stop_rx = interrupt.rx.clone();

    let spec = Spec::of(s);
    let hooks = Arc::new(RecorderHooks(recorder.clone()));
    let mut say = |l: &str| progress.say(l);
    let cluster = rt.block_on(async {
        tokio::select! {
            biased;
            _ = stop_rx.changed() => Err("interrupted while the control plane was starting".to_owned()),
            c = LocalCluster::up(&spec, opts.keep, hooks, &mut say) => c,
        }
    });
    let cluster = match cluster {
        Ok(c) => c,
        Err(e) => {
            interrupt.stop();
            let message = format!(
                "the local control plane did not start: {e}; everything started was stopped"
            );
            return Err(if interrupt.came() {
                BackendError::Interrupted {
                    message,
                    events: Vec::new(),
                }
            } else {
                BackendError::Environment(message)
            });
        }
    };
    let dir = cluster.dir.clone();
    let names = cluster.processes();
    let _ = zero.set(Instant::now());
    let epoch = k8s_openapi::jiff::Timestamp::now();

    let (tx, rx) = mpsc::unbounded_channel();
    let observer = Observer {
        recorder: recorder.clone(),
        epoch,
        deployments: s.deployments(),
        leases: s.leases().keys().map(|l| l.to_string()).collect(),
        watch_timeout: 60,
        holder_names: Default::default(),
    };
    let observer = rt.spawn(observer.run(cluster.admin.clone(), rx));

    let world = LocalWorld {
        cluster,
        rt: rt.handle().clone(),
        recorder: recorder.clone(),
        commands: tx,
        failed: BTreeMap::new(),
    };
    let mut driver = Driver::new(world, recorder.clone(), names);
    let ended_at = realtime::play(&mut driver, s, plan, &interrupt, progress);
    let end_ms = ended_at.as_millis() as u64;
    if interrupt.came() {
        recorder.record_at(end_ms, EventKind::RunInterrupted {});
    }
    recorder.record_at(end_ms, EventKind::RunEnded {});
    observer.abort();
    interrupt.stop();
    let kept = rt.block_on({
        let LocalWorld { cluster, .. } = driver.world;
        cluster.down()
    });
    drop(_entered);
    rt.shutdown_timeout(Duration::from_secs(2));
    match kept {
        Some(d) => progress.say(&format!("kept the run directory {}", d.display())),
        None => progress.say(&format!("stopped every process; removed {}", dir.display())),
    }
    if interrupt.came() {
        return Err(BackendError::Interrupted {
            message: format!(
                "interrupted at t={}; every process was stopped{}",
                fmt_ms(end_ms),
                if opts.keep {
                    String::new()
                } else {
                    " and the run directory removed".to_owned()
                }
            ),
            events: recorder.snapshot(),
        });
    }
    Ok(recorder.snapshot())
}

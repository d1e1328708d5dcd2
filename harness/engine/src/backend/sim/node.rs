//! A simulated node process: the shared fake node and node agent ([`crate::fake_node`]) on a
//! turmoil host. The pods it runs are tasks of that host: they share the node's network (a
//! partition of the node cuts them too) and die with it (a crashed node runs nothing until it is
//! back and its agent starts them again, as a rebooted kubelet does).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use tokio::task::JoinHandle;

use super::process::Proc;
use super::{controller_manager, scheduler};
use crate::fake_node::{ContainerOp, Containers, PodBook, PodGroup, Workload};
use kubechaos_core::scenario::Component;

#[derive(Default)]
struct State {
    /// Every pod's process, kept across restarts so that it counts its incarnations on.
    procs: BTreeMap<String, Proc>,
    /// The pods started, their nodes, and which are held down.
    book: PodBook,
    /// Running (or finished, not yet noticed) tasks.
    tasks: BTreeMap<String, JoinHandle<()>>,
}

/// The containers of every node of a simulated cluster: each a task, on its node's host,
/// running the component's model. Pods are named `NAMESPACE/NAME`; their processes `NAME`.
pub struct SimContainers {
    new_proc: Box<dyn Fn(&str) -> Proc + Send + Sync>,
    state: Mutex<State>,
}

impl SimContainers {
    /// Containers whose processes `new_proc` makes from a pod's name.
    pub fn new(new_proc: impl Fn(&str) -> Proc + Send + Sync + 'static) -> Self {
        SimContainers {
            new_proc: Box::new(new_proc),
            state: Mutex::default(),
        }
    }

    fn stop_locked(st: &mut State, pod: &str, reason: &str) {
        if let Some(task) = st.tasks.remove(pod) {
            if !task.is_finished() {
                task.abort();
                if let Some(p) = st.procs.get(pod) {
                    p.exit(reason);
                }
            }
        }
    }

    /// A `kill`, `remove` or `start` step on self-hosted component `c` (all its pods, or only
    /// pod `only`). Returns the pods touched.
    pub(crate) fn act(&self, group: &PodGroup, only: Option<&str>, op: ContainerOp) -> Vec<String> {
        let mut st = self.state.lock().expect("containers");
        let tasks: BTreeSet<String> = st
            .tasks
            .iter()
            .filter(|(_, t)| !t.is_finished())
            .map(|(p, _)| p.clone())
            .collect();
        let (stop, touched) = st.book.plan(group, only, op, |p| tasks.contains(p));
        let reason = match op {
            ContainerOp::Remove => "removed: its container is held down",
            _ => "killed",
        };
        for pod in stop {
            Self::stop_locked(&mut st, &pod, reason);
        }
        touched
    }

    /// Node `node` stopped: its pods' processes ended with it.
    pub(crate) fn node_stopped(&self, node: &str) {
        let mut st = self.state.lock().expect("containers");
        for pod in st.book.on_node(node) {
            Self::stop_locked(&mut st, &pod, "its node stopped");
        }
    }
}

impl Containers for SimContainers {
    fn start(
        &self,
        node: &str,
        pod: &str,
        workload: &Workload,
    ) -> Result<(), crate::fake_node::ContainerError> {
        let c = match workload {
            Workload::Component(c, _) => *c,
            // The sim's backend check refuses manifests and pod agents: no such pod is made.
            Workload::Program(_) => {
                return Err("the sim runs no programs of yours; expected `--backend local`".into())
            }
        };
        let mut st = self.state.lock().expect("containers");
        let p = match st.procs.get(pod) {
            Some(p) => p.clone(),
            None => {
                let p = (self.new_proc)(pod.rsplit('/').next().unwrap_or(pod));
                st.procs.insert(pod.to_owned(), p.clone());
                p
            }
        };
        st.book.started(pod, node, Some(PodGroup::Component(c)));
        // The models take no flags: they mirror the defaults these Deployments' arguments keep.
        // A task of the calling node's host.
        let task = tokio::task::spawn_local(async move {
            match c {
                Component::KubeScheduler => scheduler::run(p).await,
                Component::KubeControllerManager => controller_manager::run(p).await,
            }
        });
        st.tasks.insert(pod.to_owned(), task);
        Ok(())
    }

    /// A graceful stop, as the kubelet stops a deleted pod's container: the process is asked to
    /// terminate (SIGTERM) and handles it as its upstream component does (the scheduler releases
    /// its lease; both exit 0); what has not ended after the grace period is killed.
    fn stop(&self, pod: &str, reason: &str) {
        let mut st = self.state.lock().expect("containers");
        if let Some(task) = st.tasks.remove(pod) {
            if !task.is_finished() {
                match st.procs.get(pod).cloned() {
                    Some(p) => {
                        p.terminate();
                        let reason = reason.to_owned();
                        tokio::task::spawn_local(async move {
                            tokio::time::sleep(crate::backend::local::pods::STOP_GRACE).await;
                            if !task.is_finished() {
                                task.abort();
                                p.exit(&format!("{reason}; killed after the grace period"));
                            }
                        });
                    }
                    None => task.abort(),
                }
            }
        }
        st.book.forget(pod);
    }

    fn running(&self, pod: &str) -> bool {
        let st = self.state.lock().expect("containers");
        st.tasks.get(pod).is_some_and(|t| !t.is_finished())
    }

    fn held(&self, pod: &str) -> bool {
        self.state.lock().expect("containers").book.held(pod)
    }
}

/// Run a fake node and its agent until its host is stopped.
pub async fn run(p: Proc, containers: Arc<SimContainers>) {
    p.start();
    crate::fake_node::run(p.client(), &p.name, p.clock.as_ref(), containers.as_ref()).await;
}

//! A simulated node process: the shared fake node and node agent ([`crate::fake_node`]) on a
//! turmoil host. The pods it runs are tasks of that host: they share the node's network (a
//! partition of the node cuts them too) and die with it (a crashed node runs nothing until it is
//! back and its agent starts them again, as a rebooted kubelet does).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::task::JoinHandle;

use super::process::Proc;
use super::{controller_manager, scheduler};
use crate::fake_node::Containers;
use crate::scenario::Component;

/// Every pod's process of a run, by pod (`NAMESPACE/NAME`): kept across node restarts so that a
/// pod's process counts its incarnations on.
pub type PodProcs = Arc<Mutex<BTreeMap<String, Proc>>>;

/// The containers of one node's agent: each a task running the component's model.
pub struct SimContainers {
    procs: PodProcs,
    /// Makes a process for a pod's name.
    new_proc: Box<dyn Fn(&str) -> Proc + Send + Sync>,
    tasks: Mutex<BTreeMap<String, JoinHandle<()>>>,
}

impl Containers for SimContainers {
    fn start(&self, _node: &str, pod: &str, c: Component, _args: &[String]) -> Result<(), String> {
        let p = self
            .procs
            .lock()
            .expect("pod processes")
            .entry(pod.to_owned())
            .or_insert_with(|| (self.new_proc)(pod.rsplit('/').next().unwrap_or(pod)))
            .clone();
        // The models take no flags: they mirror the defaults these Deployments' arguments keep.
        let task = tokio::task::spawn_local(async move {
            match c {
                Component::KubeScheduler => scheduler::run(p).await,
                Component::KubeControllerManager => controller_manager::run(p).await,
            }
        });
        self.tasks
            .lock()
            .expect("tasks")
            .insert(pod.to_owned(), task);
        Ok(())
    }

    fn stop(&self, pod: &str, reason: &str) {
        if let Some(task) = self.tasks.lock().expect("tasks").remove(pod) {
            if !task.is_finished() {
                task.abort();
                if let Some(p) = self.procs.lock().expect("pod processes").get(pod) {
                    p.exit(reason);
                }
            }
        }
    }

    fn running(&self, pod: &str) -> bool {
        self.tasks
            .lock()
            .expect("tasks")
            .get(pod)
            .is_some_and(|t| !t.is_finished())
    }
}

/// Run a fake node and its agent until its host is stopped.
pub async fn run(p: Proc, procs: PodProcs) {
    p.start();
    let (recorder, clock, seed) = (p.recorder.clone(), p.clock.clone(), p.seed);
    let containers = SimContainers {
        procs,
        new_proc: Box::new(move |name| Proc::new(name, recorder.clone(), clock.clone(), seed)),
        tasks: Mutex::default(),
    };
    crate::fake_node::run(p.client(), &p.name, p.clock.as_ref(), &containers).await;
}

impl Drop for SimContainers {
    /// The node's host crashed (or the run ended): its pods' processes end with it.
    fn drop(&mut self) {
        let procs = self.procs.lock().expect("pod processes");
        for (pod, task) in self.tasks.lock().expect("tasks").iter() {
            if !task.is_finished() {
                task.abort();
                if let Some(p) = procs.get(pod) {
                    p.exit("its node stopped");
                }
            }
        }
    }
}

//! A simulated node process: the shared fake node ([`crate::fake_node`]) on a turmoil host.

use super::process::Proc;

/// Run a fake node until its host is stopped.
pub async fn run(p: Proc) {
    p.start();
    crate::fake_node::run(p.client(), &p.name, p.clock.as_ref()).await;
}

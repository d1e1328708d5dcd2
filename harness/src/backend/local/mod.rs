//! The `local` backend: a real control plane started on this machine from upstream binaries.
//!
//! Built so far: the pinned binaries ([`build`]), the certificates ([`pki`]), starting the
//! control plane ([`cluster`], behind `kubechaos cluster up`) and the per-client partition proxy
//! ([`proxy`]). Playing scenarios on it (a [`World`](super::driver::World) over these processes
//! and proxies) comes next; until then `--backend local` answers exit 2.

pub mod build;
pub mod cluster;
pub mod pki;
pub mod proxy;

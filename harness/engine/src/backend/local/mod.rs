//! The `local` backend: a real control plane started on this machine from upstream binaries.
//!
//! - [`build`]: the pinned binaries, built once into a cache outside the repository;
//! - [`pki`]: certificates and kubeconfigs, generated in Rust;
//! - [`cluster`]: the launcher behind `kubechaos cluster up` and scenario runs (processes,
//!   supervision hooks, fake nodes, per-client proxies);
//! - [`error`]: why the control plane or one of its processes could not start;
//! - [`proxy`]: the TCP proxy that lets a link fault act on one client's traffic;
//! - [`podnet`]: a program pod's own network namespace, its API server address forwarded to
//!   its proxy;
//! - [`webhook`]: the admission webhook that carries out `api-errors`;
//! - [`run`]: a scenario played on it, through the shared driver;
//! - [`runs`]: the control planes running on this machine (`cluster status`, `cluster down`).

pub mod build;
pub mod cluster;
pub mod error;
pub(crate) mod kubelet;
pub(crate) mod pki;
pub(crate) mod podnet;
pub(crate) mod pods;
pub(crate) mod proxy;
pub mod run;
pub mod runs;
pub(crate) mod webhook;

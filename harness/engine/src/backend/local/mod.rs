//! The `local` backend: a real control plane started on this machine from upstream binaries.
//!
//! - [`build`]: the pinned binaries, built once into a cache outside the repository;
//! - [`pki`]: certificates and kubeconfigs, generated in Rust;
//! - [`cluster`]: the launcher behind `kubechaos cluster up` and scenario runs (processes,
//!   supervision hooks, fake nodes, per-client proxies);
//! - [`proxy`]: the TCP proxy that lets a partition cut one client off;
//! - [`run`]: a scenario played on it, through the shared driver.

pub mod build;
pub mod cluster;
pub mod pki;
pub mod pods;
pub mod proxy;
pub mod run;

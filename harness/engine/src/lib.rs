//! kubechaos's engine: the worlds a scenario is played against, and what plays it. It takes a
//! scenario and its plan from `kubechaos-core`, carries the plan out against a world, records what
//! it observed as events, and hands them back to the core to judge and report:
//!
//! [`run`] (one run) -> [`backend`] (sim, local, kube, and the driver that carries out every
//! fault for any of them) -> [`observer`] (the observed timeline); [`explore`] generates
//! schedules over the same path.
//!
//! What runs the same in the sim and against real API servers: [`elector`], [`agent`],
//! [`fake_node`] (fake nodes and their node agent), [`selfhosted`] (a self-hosted control plane's
//! Deployments and bootstrap), [`recover`] (disaster recovery) and [`kubeclient`] (the
//! Kubernetes helpers they share), [`backoff`] (the kubelet's restart back-off). [`clock`] is
//! injectable time; [`config`] is kubechaos's own configuration file.
#![warn(missing_docs)]

pub mod agent;
pub mod backend;
pub(crate) mod backoff;
pub mod clock;
pub mod config;
pub(crate) mod elector;
pub mod explore;
pub(crate) mod fake_node;
pub mod kubeclient;
pub mod manifests;
pub mod observer;
pub mod recover;
pub mod run;
pub(crate) mod selfhosted;
pub mod suite;

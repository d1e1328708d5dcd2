//! kubechaos: plays fault scenarios against Kubernetes control planes and judges whether
//! leadership is re-acquired and the cluster becomes schedulable again.
//!
//! The run path, one module each:
//! [`scenario`] (model, parse, validate) -> [`plan`] -> [`backend`] (sim, local, kube)
//! -> [`observer`] and [`events`] (the observed timeline) -> [`invariants`] -> [`report`].
//! [`cli`] wires them up; [`config`] is kubechaos's own configuration file. What runs the same in the sim and against real API servers:
//! [`elector`], [`agent`], [`fake_node`] (fake nodes and their node agent), [`selfhosted`] (a
//! self-hosted control plane's Deployments and bootstrap) and [`recover`] (disaster recovery).
#![warn(missing_docs)]

pub mod agent;
pub mod backend;
pub mod cli;
pub mod clock;
pub mod config;
pub mod elector;
pub mod events;
pub mod exit;
pub mod explore;
pub mod fake_node;
pub mod invariants;
pub mod kubeclient;
pub mod observer;
pub mod plan;
pub mod recover;
pub mod report;
pub mod run;
pub mod scenario;
pub mod selector;
pub mod selfhosted;

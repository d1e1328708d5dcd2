//! The `kubechaos` binary: the command line ([`cli`]: clap and thin commands) over the core
//! (`kubechaos-core`: scenarios, plans, events, invariants, reports) and the engine
//! (`kubechaos-engine`: runs, backends); [`exit`] maps results to the stable exit codes.

mod cli;
mod exit;

fn main() {
    std::process::exit(cli::main());
}

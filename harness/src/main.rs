//! The `kubechaos` binary: the command line ([`cli`]: clap) and thin [`commands`] over the core
//! (`kubechaos-core`: scenarios, plans, events, invariants, reports) and the engine
//! (`kubechaos-engine`: runs, suites, backends). Each command ends in a [`failure::Verdict`] or a
//! typed [`failure::Failure`]; [`failure::exit_code`] is the one place either becomes a stable
//! exit code ([`exit`]).

mod cli;
mod commands;
#[cfg(test)]
mod docs_check;
mod exit;
mod failure;

use clap::Parser;

use cli::{Cli, ClusterCommand, Command, RecoverCommand};
use failure::Verdict;

fn main() {
    std::process::exit(run());
}

/// Parse arguments, run the command, and return its exit code.
fn run() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                exit::BAD_INPUT
            } else {
                exit::HELD
            };
        }
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| cli.log_filter().into()),
        )
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal: a redirected log is read as text.
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none(),
        )
        .try_init();
    // Chaos on kubechaos itself (its own reads delayed): a value that is not a duration is the
    // user's input, said before anything runs.
    if let Err(e) = kubechaos_engine::kubeclient::self_delay() {
        eprintln!("kubechaos: {e}");
        return exit::BAD_INPUT;
    }
    let end = match cli.command {
        Command::Scenario(args) => commands::run::scenario(&args, cli.verbose > 0),
        Command::Suite(args) => commands::run::suite(&args),
        Command::Explore(args) => commands::run::explore(&args),
        Command::Report(args) => commands::run::report(&args),
        Command::List { output } => commands::files::list(output),
        Command::Validate {
            paths,
            backend,
            provider,
            output,
        } => commands::files::validate(&paths, backend, provider, output),
        Command::Schema => {
            print!("{}", kubechaos_core::scenario::json_schema());
            Ok(Verdict::Held)
        }
        Command::Init(args) => commands::init::init(&args),
        Command::Completion { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "kubechaos",
                &mut std::io::stdout(),
            );
            Ok(Verdict::Held)
        }
        Command::Cluster(ClusterCommand::Build) => commands::cluster::build(),
        Command::Cluster(ClusterCommand::Up(args)) => commands::cluster::up(&args),
        Command::Cluster(ClusterCommand::Status) => commands::cluster::status(),
        Command::Cluster(ClusterCommand::Down { dir }) => commands::cluster::down(dir.as_deref()),
        Command::Agent(args) => commands::agent::agent(&args),
        Command::Recover(r) => match &r.command {
            Some(RecoverCommand::PodFrom(args)) => commands::recover::pod_from(args),
            Some(RecoverCommand::Bind(args)) => commands::recover::bind(args),
            None => commands::recover::leftovers(&r),
        },
    };
    failure::exit_code(end)
}

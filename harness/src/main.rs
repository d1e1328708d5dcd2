//! The `kubechaos` binary: everything lives in the library; this only maps the result to an exit
//! code (see `kubechaos::exit`).

fn main() {
    std::process::exit(kubechaos::cli::main());
}

//! The `jobworker` command line, as a library: a user's binary is
//! `fn main() { jobworker::cli::main() }`.

mod args;
mod commands;
mod output;
mod server;

use clap::Parser;

pub use args::{Cli, Command};

/// Exit code for bad input (usage, invalid values).
pub const EXIT_USAGE: i32 = 2;
/// Exit code when the board refused a verb (not found, not owner, claimed).
pub const EXIT_REFUSED: i32 = 3;
/// Exit code when the server is unavailable.
pub const EXIT_UNAVAILABLE: i32 = 4;
/// Exit code for any other failure.
pub const EXIT_FAILURE: i32 = 1;

/// Runs the `jobworker` command with the process arguments and exits.
pub fn main() {
    let cli = Cli::parse();
    std::process::exit(run(cli));
}

/// Runs a parsed command line; returns the exit code.
pub fn run(cli: Cli) -> i32 {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("jobworker: cannot start the async runtime: {e}");
            return EXIT_FAILURE;
        }
    };
    match runtime.block_on(commands::execute(&cli)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("jobworker: {e}");
            exit_code(&e)
        }
    }
}

fn exit_code(e: &crate::Error) -> i32 {
    if e.is_invalid() {
        EXIT_USAGE
    } else if e.is_not_found() || e.is_not_owner() || e.is_already_claimed() {
        EXIT_REFUSED
    } else if e.is_unavailable() {
        EXIT_UNAVAILABLE
    } else {
        EXIT_FAILURE
    }
}

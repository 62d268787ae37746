//! The `jobworker` command line, as a library: a user's binary is
//! `fn main() { jobworker::cli::main() }`.

mod args;
mod commands;
mod feature_args;
mod features;
mod output;
mod post;
mod run;
mod server;
mod workdir;

use clap::Parser;

pub use args::{Cli, Command, LogFormat, RunArgs};

/// Exit code for bad input (usage, invalid values, a feature the board
/// does not offer).
pub const EXIT_USAGE: i32 = 2;
/// Exit code when the board refused a verb (not found, not owner, claimed).
pub const EXIT_REFUSED: i32 = 3;
/// Exit code when the server is unavailable.
pub const EXIT_UNAVAILABLE: i32 = 4;
/// Exit code for any other failure.
pub const EXIT_FAILURE: i32 = 1;

/// Set to check a command line only (it is parsed, not run): what
/// `scripts/readme-check` does with the commands the README quotes.
pub const PARSE_ONLY_ENV: &str = "JOBWORKER_PARSE_ONLY";

/// Runs the `jobworker` command with the process arguments and exits.
pub fn main() {
    let cli = Cli::parse();
    if std::env::var_os(PARSE_ONLY_ENV).is_some() {
        std::process::exit(0);
    }
    std::process::exit(run(cli));
}

/// Runs a parsed command line; returns the exit code.
pub fn run(cli: Cli) -> i32 {
    init_logging(cli.log_format);
    let result = match &cli.command {
        None => run::run(&cli.board, &cli.run),
        Some(Command::Run(a)) => run::run(&cli.board, a),
        Some(Command::Handlers) => commands::handlers(cli.json).map(|()| 0),
        Some(Command::Server(c)) => server::server(&cli.board, c, cli.json).map(|()| 0),
        Some(Command::Completions { shell }) => completions(*shell).map(|()| 0),
        Some(Command::Man) => man().map(|()| 0),
        Some(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| crate::Error::io("cannot start the async runtime", e))
            .and_then(|rt| rt.block_on(commands::execute(&cli)))
            .map(|()| 0),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("jobworker: {e}");
            exit_code(&e)
        }
    }
}

/// `jobworker completions SHELL`: the completion script, from the clap
/// definition.
fn completions(shell: clap_complete::Shell) -> crate::Result<()> {
    let mut script = Vec::new();
    let mut command = <Cli as clap::CommandFactory>::command();
    clap_complete::generate(shell, &mut command, "jobworker", &mut script);
    output::raw(&script);
    Ok(())
}

/// `jobworker man`: the manual page (roff), from the clap definition.
fn man() -> crate::Result<()> {
    let mut page = Vec::new();
    clap_mangen::Man::new(<Cli as clap::CommandFactory>::command())
        .render(&mut page)
        .map_err(|e| crate::Error::io("cannot write the manual page", e))?;
    output::raw(&page);
    Ok(())
}

/// Logs go to stderr, as text or JSON lines; `RUST_LOG` filters (default
/// `info`). Writes synchronously: no logging thread exists before `fork`.
fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(crate::console::Stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

fn exit_code(e: &crate::Error) -> i32 {
    if e.is_invalid() || e.is_unsupported() {
        EXIT_USAGE
    } else if e.is_not_found()
        || e.is_not_owner()
        || e.is_already_claimed()
        || e.is_exists()
        || e.is_finished()
        || e.is_cancelled()
    {
        EXIT_REFUSED
    } else if e.is_unavailable() {
        EXIT_UNAVAILABLE
    } else {
        EXIT_FAILURE
    }
}

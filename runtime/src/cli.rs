//! The `jobworker` command line, as a library: a user's binary is
//! `fn main() { jobworker::cli::main() }`. Parses the arguments
//! (`cli/args.rs`), runs the command (`cli/cmd/`), and exits with its code
//! (`cli/exit_code.rs`).

mod args;
mod cmd;
mod exit_code;
mod job_args;
mod output;
mod server;
mod values;
mod workdir;

use clap::Parser;

pub use args::{Cli, Command, LogFormat};
pub use cmd::run::RunArgs;
pub use exit_code::{EXIT_FAILURE, EXIT_REFUSED, EXIT_UNAVAILABLE, EXIT_USAGE};

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
    let definition = || <Cli as clap::CommandFactory>::command();
    let result = match &cli.command {
        None => cmd::run::run(&cli.board, &cli.run),
        Some(Command::Run(a)) => cmd::run::run(&cli.board, a),
        Some(Command::Handlers) => cmd::handlers::run(cli.json).map(|()| 0),
        Some(Command::Server(c)) => cmd::server::run(&cli.board, c, cli.json).map(|()| 0),
        Some(Command::Completions { shell }) => cmd::docs::completions(definition(), *shell).map(|()| 0),
        Some(Command::Man) => cmd::docs::man(definition()).map(|()| 0),
        Some(command) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| crate::Error::io("cannot start the async runtime", e))
            .and_then(|rt| rt.block_on(execute(&cli, command)))
            .map(|()| 0),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("jobworker: {e}");
            exit_code::of(&e)
        }
    }
}

/// Runs a command that talks to the board (the others are run by [`run`]).
async fn execute(cli: &Cli, command: &Command) -> crate::Result<()> {
    use cmd::*;
    if let Command::Bench(a) = command {
        return bench::run(&cli.board, a, cli.json).await;
    }
    let spec = crate::cli::server::spec(&cli.board)?;
    let board = &spec.connect().await?;
    let json = cli.json;
    match command {
        Command::Workers => workers::run(board, json).await,
        Command::Post(a) => post::run(board, a, json).await,
        Command::List(a) => list::run(board, a, json).await,
        Command::Show(a) => show::run(board, a, json).await,
        Command::Count(q) => count::run(board, q, json).await,
        Command::Claim(a) => claim::run(board, a, json).await,
        Command::Extend(a) => lease::extend(board, a, json).await,
        Command::Consume(a) => lease::consume(board, a, json).await,
        Command::Abandon(a) => lease::abandon(board, a, json).await,
        Command::Trash(a) => lease::trash(board, a, json).await,
        Command::Reap(q) => reap::run(board, q, json).await,
        Command::Priority(a) => priority::run(board, a, json).await,
        Command::Cancel(a) => cancel::run(board, a, json).await,
        Command::Tag(t) => tag::run(board, t, json).await,
        Command::Track(a) => track::run(board, a, true, json).await,
        Command::Untrack(a) => track::run(board, a, false, json).await,
        Command::Failed(a) => failed::run(board, a, json).await,
        Command::Retry(a) => settle::run(board, a, false, json).await,
        Command::Purge(a) => settle::run(board, a, true, json).await,
        Command::Recur(r) => recur::run(board, r, json).await,
        Command::Pause(q) => queues::pause(board, q, json).await,
        Command::Resume(q) => queues::resume(board, q, json).await,
        Command::Limit(a) => queues::limit(board, a, json).await,
        Command::Queues => queues::list(board, json).await,
        Command::Stats(a) => stats::run(board, a, json).await,
        Command::Events(a) => events::run(board, a).await,
        Command::Web(a) => web::run(&spec, board, a).await,
        Command::History(a) => history::run(board, a, json).await,
        Command::Config(c) => config::run(board, c, json).await,
        // Run by `run` without a board.
        Command::Run(_)
        | Command::Handlers
        | Command::Bench(_)
        | Command::Server(_)
        | Command::Completions { .. }
        | Command::Man => Ok(()),
    }
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

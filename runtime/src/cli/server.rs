//! Which board a command talks to: ZooKeeper when `--zookeeper` is given;
//! otherwise the given Redis URL, the private board in `--data-dir`, a
//! Redis answering on 127.0.0.1:6379, or the user's private board (see
//! [`crate::local`]); and `jobworker server status|stop` for the private
//! board.

use crate::board::BoardSpec;
use crate::cli::args::{BoardArgs, ServerCommand};
use crate::cli::output::outln;
use crate::error::Result;
use crate::local::{DefaultBoard, LocalBoard, LOCAL_REDIS};
use crate::redis::RedisOptions;
use crate::zookeeper::ZooKeeperOptions;

/// The private board a command without a URL uses: `--data-dir`'s, else
/// the user's.
fn private_board(args: &BoardArgs) -> Result<LocalBoard> {
    match &args.data_dir {
        Some(dir) => Ok(LocalBoard::at(dir)),
        None => LocalBoard::for_user(),
    }
}

/// The Redis URL of the board; says on stderr (the first line of output)
/// which one is used when none was given.
fn resolve(args: &BoardArgs) -> Result<String> {
    if let Some(url) = &args.redis {
        return Ok(url.clone());
    }
    let found = DefaultBoard::find(args.data_dir.as_deref())?;
    match &found {
        DefaultBoard::Local { .. } => {
            eprintln!("jobworker: no --redis given; using the Redis answering on {LOCAL_REDIS}")
        }
        DefaultBoard::Private { board, running } => {
            let how = if running.started_now {
                "started now; it keeps running for the next command, `jobworker server stop` ends it"
            } else {
                "running"
            };
            eprintln!(
                "jobworker: no --redis given; using the private board in {} (redis-server pid {}, {how})",
                board.dir().display(),
                running.pid
            );
        }
    }
    Ok(found.url().to_owned())
}

/// Board options for the Redis at `url` from the command line.
pub(crate) fn options(url: String, args: &BoardArgs) -> Result<RedisOptions> {
    let mut opts = RedisOptions::new(url);
    for pair in &args.namespaces {
        let Some((queue, ns)) = pair.split_once('=') else {
            return Err(crate::Error::invalid(format!(
                "--namespace {pair:?} must look like QUEUE=NAMESPACE"
            )));
        };
        opts = opts.namespace(queue, ns);
    }
    Ok(opts)
}

/// The board a command uses.
pub(crate) fn spec(args: &BoardArgs) -> Result<BoardSpec> {
    if let Some(connect) = &args.zookeeper {
        if !args.namespaces.is_empty() {
            return Err(crate::Error::invalid(
                "--namespace applies to Redis, not to --zookeeper",
            ));
        }
        return Ok(BoardSpec::ZooKeeper(ZooKeeperOptions::new(connect.clone())));
    }
    Ok(BoardSpec::Redis(options(resolve(args)?, args)?))
}

/// `jobworker server status|stop`: the private board's server (never
/// started by these).
pub(crate) fn server(args: &BoardArgs, command: &ServerCommand, json: bool) -> Result<()> {
    let board = private_board(args)?;
    let dir = board.dir().display().to_string();
    match command {
        ServerCommand::Status => {
            let running = board.status()?;
            if json {
                let pid = running.as_ref().map(|r| r.pid);
                let url = running.as_ref().map(|r| r.url.clone());
                crate::cli::output::json(
                    &serde_json::json!({"dir": dir, "running": pid.is_some(), "pid": pid, "url": url}),
                );
            } else {
                match running {
                    Some(r) => outln!(
                        "the private board in {dir} is running: redis-server pid {} at {}",
                        r.pid,
                        r.url
                    ),
                    None => {
                        outln!("the private board in {dir} is not running (the next command starts it)")
                    }
                }
            }
        }
        ServerCommand::Stop => {
            let stopped = board.stop()?;
            if json {
                crate::cli::output::json(&serde_json::json!({"dir": dir, "stopped": stopped}));
            } else {
                match stopped {
                    Some(pid) => outln!(
                        "stopped the private board in {dir} (redis-server pid {pid}); its data stays there"
                    ),
                    None => outln!("the private board in {dir} was not running"),
                }
            }
        }
    }
    Ok(())
}

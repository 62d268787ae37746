//! Which board a command talks to: ZooKeeper when `--zookeeper` is given;
//! otherwise the given Redis URL, a Redis answering on 127.0.0.1:6379, or a
//! private redis-server started for this process.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::board::BoardSpec;
use crate::cli::args::BoardArgs;
use crate::embedded::{RedisServer, ServerOptions, Transport};
use crate::error::Result;
use crate::redis::RedisOptions;
use crate::zookeeper::ZooKeeperOptions;

/// The well-known local Redis tried before starting a private one.
pub const LOCAL_REDIS: &str = "127.0.0.1:6379";

/// The Redis a command uses; a private server lives as long as this value.
pub(crate) struct Target {
    /// Connection URL.
    pub url: String,
    /// The private server, stopped on drop.
    pub _server: Option<RedisServer>,
}

/// True when a Redis without a password answers PING at `addr`.
fn answers_ping(addr: &str) -> bool {
    let Ok(addr) = addr.parse::<SocketAddr>() else {
        return false;
    };
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 16];
    s.write_all(b"PING\r\n").is_ok() && matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
}

/// Resolves the board location; says on stderr which Redis is used when
/// none was given.
pub(crate) fn resolve(args: &BoardArgs) -> Result<Target> {
    if let Some(url) = &args.redis {
        return Ok(Target {
            url: url.clone(),
            _server: None,
        });
    }
    if args.data_dir.is_none() && answers_ping(LOCAL_REDIS) {
        eprintln!("jobworker: no --redis given; using the Redis answering on {LOCAL_REDIS}");
        return Ok(Target {
            url: format!("redis://{LOCAL_REDIS}/"),
            _server: None,
        });
    }
    let opts = ServerOptions {
        transport: Transport::Unix,
        appendonly: args.data_dir.is_some(),
        data_dir: args.data_dir.clone(),
        ..ServerOptions::default()
    };
    let server = RedisServer::start(opts)?;
    let kept = match &args.data_dir {
        Some(d) => format!("data kept in {}", d.display()),
        None => "data discarded on exit".to_owned(),
    };
    eprintln!(
        "jobworker: no --redis given; started a private redis-server (pid {}) at {} ({kept}); it stops when jobworker exits",
        server.pid(),
        server.url()
    );
    Ok(Target {
        url: server.url(),
        _server: Some(server),
    })
}

/// Board options for `target` from the command line.
pub(crate) fn options(target: &Target, args: &BoardArgs) -> Result<RedisOptions> {
    let mut opts = RedisOptions::new(target.url.clone());
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

/// The board a command uses, and the private Redis it may have started
/// (keep it alive as long as the board is used).
pub(crate) fn spec(args: &BoardArgs) -> Result<(BoardSpec, Option<Target>)> {
    if let Some(connect) = &args.zookeeper {
        if !args.namespaces.is_empty() {
            return Err(crate::Error::invalid(
                "--namespace applies to Redis, not to --zookeeper",
            ));
        }
        return Ok((BoardSpec::ZooKeeper(ZooKeeperOptions::new(connect.clone())), None));
    }
    let target = resolve(args)?;
    let opts = options(&target, args)?;
    Ok((BoardSpec::Redis(opts), Some(target)))
}

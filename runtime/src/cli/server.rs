//! Which board a command talks to ([`BoardArgs`]): ZooKeeper when
//! `--zookeeper` is given; otherwise the given Redis URL, the private board
//! in `--data-dir`, a Redis answering on 127.0.0.1:6379, or the user's
//! private board (see [`crate::local`]).

use std::path::PathBuf;

use clap::Args;

use crate::board::BoardSpec;
use crate::error::Result;
use crate::local::{DefaultBoard, LocalBoard, LOCAL_REDIS};
use crate::redis::RedisOptions;
use crate::zookeeper::{ZooKeeperOptions, ZooKeeperTls};

/// Where the board is.
#[derive(Debug, Args)]
pub struct BoardArgs {
    /// Redis URL (redis://, rediss://, unix://; user:password@ allowed),
    /// or a master behind sentinels:
    /// redis+sentinel://[user:password@]host:port[,host:port…]/MASTER[/db]
    /// (rediss+sentinel:// for TLS), or a Redis Cluster:
    /// redis+cluster://[user:password@]host:port[,host:port…]
    /// (rediss+cluster:// for TLS). Without it: a Redis on
    /// 127.0.0.1:6379 if one answers, otherwise a private redis-server
    /// started for this command.
    #[arg(long, global = true, env = "JOBWORKER_REDIS_URL")]
    pub redis: Option<String>,
    /// Use the ZooKeeper board at `[user:password@]host:port[,host:port]/root`
    /// instead of Redis (queue Q lives at `<root>/Q/jobs`, taskflow's
    /// layout). With `user:password@` the session authenticates with that
    /// digest and every znode jobworker creates is readable and writable
    /// by that digest only.
    #[arg(long, global = true, env = "JOBWORKER_ZOOKEEPER", conflicts_with_all = ["redis", "data_dir"])]
    pub zookeeper: Option<String>,
    /// With ZooKeeper credentials: also give read access to every znode
    /// jobworker creates to SCHEME:ID (ZooKeeper's ACL syntax, e.g.
    /// `digest:monitor:BASE64HASH`, `ip:10.0.0.0/8`).
    #[arg(
        long,
        global = true,
        value_name = "SCHEME:ID",
        env = "JOBWORKER_ZOOKEEPER_READER",
        requires = "zookeeper"
    )]
    pub zookeeper_reader: Option<String>,
    /// Reach every ZooKeeper server over TLS (its secureClientPort),
    /// checking its certificate against the CA certificates in FILE (PEM)
    /// and the host name or address it is reached by.
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "JOBWORKER_ZOOKEEPER_CA",
        requires = "zookeeper"
    )]
    pub zookeeper_ca: Option<PathBuf>,
    /// With --zookeeper-ca: the client certificate (PEM) shown to servers
    /// that ask for one (ZooKeeper's default `ssl.clientAuth=need`).
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "JOBWORKER_ZOOKEEPER_CERT",
        requires_all = ["zookeeper_ca", "zookeeper_key"]
    )]
    pub zookeeper_cert: Option<PathBuf>,
    /// With --zookeeper-cert: its private key (PEM).
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "JOBWORKER_ZOOKEEPER_KEY",
        requires = "zookeeper_cert"
    )]
    pub zookeeper_key: Option<PathBuf>,
    /// The private board's directory (its redis-server, unix socket and
    /// append-only file). Default: `$XDG_DATA_HOME/jobworker`, else
    /// `~/.local/share/jobworker`, used when no --redis is given and nothing
    /// answers on 127.0.0.1:6379.
    #[arg(long, global = true, env = "JOBWORKER_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Store queue Q under namespace NS instead of `jw:{Q}` (repeatable),
    /// e.g. `--namespace legacy=taskflow` to share taskflow's default board.
    #[arg(
        long = "namespace",
        global = true,
        value_name = "Q=NS",
        env = "JOBWORKER_NAMESPACES",
        value_delimiter = ','
    )]
    pub namespaces: Vec<String>,
    /// Acknowledge each write only once N replicas hold it (Redis WAIT),
    /// waiting at most MS milliseconds (default 1000): `wait:N[:MS]`. An
    /// acknowledged post or consume then survives a failover; each call
    /// costs one more round trip.
    #[arg(long, global = true, value_name = "wait:N[:MS]", env = "JOBWORKER_DURABILITY")]
    pub durability: Option<String>,
}

/// The private board a command without a URL uses: `--data-dir`'s, else
/// the user's.
pub(crate) fn private_board(args: &BoardArgs) -> Result<LocalBoard> {
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
    opts.durability = args.durability.as_deref().map(str::parse).transpose()?;
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
        if args.durability.is_some() {
            return Err(crate::Error::invalid(
                "--durability applies to Redis, not to --zookeeper (ZooKeeper acknowledges a write once a quorum holds it)",
            ));
        }
        let mut opts = ZooKeeperOptions::new(connect.clone());
        opts.reader = args.zookeeper_reader.clone();
        opts.tls = args.zookeeper_ca.as_ref().map(|ca| {
            let tls = ZooKeeperTls::new(ca);
            match (&args.zookeeper_cert, &args.zookeeper_key) {
                (Some(cert), Some(key)) => tls.with_identity(cert, key),
                _ => tls,
            }
        });
        opts.validate()?;
        return Ok(BoardSpec::ZooKeeper(opts));
    }
    Ok(BoardSpec::Redis(options(resolve(args)?, args)?))
}

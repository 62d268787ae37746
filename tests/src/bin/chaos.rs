//! `chaos`: the fault-injection run of jobworker (run it through
//! `scripts/chaos`, which builds it and the `jobworker` binary). Prints the
//! report; exits 0 when the run passed, 1 when it failed, 2 on bad flags
//! or when the run could not start.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use jobworker_tests::chaos::config::{DEFAULT_CONCURRENCY, DEFAULT_JOBS, DEFAULT_WORKERS};
use jobworker_tests::chaos::{self, Appendfsync, Backend, ChaosConfig};

/// Runs a real jobworker supervisor over N jobs while killing workers,
/// the supervisor tree and the board server, pausing the queue, freezing
/// a worker past its lease and cancelling jobs with `jobworker cancel`;
/// then checks that every job completed exactly once or was cancelled as
/// asked.
#[derive(Debug, Parser)]
#[command(name = "chaos")]
struct Args {
    /// Jobs to post.
    #[arg(long, default_value_t = DEFAULT_JOBS)]
    jobs: usize,
    /// Use a private ZooKeeper instead of a private redis-server.
    #[arg(long)]
    zookeeper: bool,
    /// The jobworker binary (it must link the scripted handler).
    #[arg(long)]
    jobworker: PathBuf,
    /// Worker processes of the supervisor.
    #[arg(long, default_value_t = DEFAULT_WORKERS)]
    workers: usize,
    /// Jobs each worker runs at once.
    #[arg(long, default_value_t = DEFAULT_CONCURRENCY)]
    concurrency: usize,
    /// Jobs to cancel during the run, two thirds while they run (default:
    /// 1 % of the jobs, at least 10, at most half).
    #[arg(long)]
    cancels: Option<usize>,
    /// Lease length in seconds.
    #[arg(long)]
    expiry: Option<f64>,
    /// Seed of the random choices (default: from the clock; the report
    /// prints it).
    #[arg(long)]
    seed: Option<u64>,
    /// Redis' appendfsync: always or everysec.
    #[arg(long, default_value = "always", value_parser = ["always", "everysec"])]
    appendfsync: String,
    /// Keep the run's files (logs, server data, run log) in this directory.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Longest wait in seconds, after the faults, for the board to settle
    /// (also: longest time without progress during the faults).
    #[arg(long)]
    settle_timeout: Option<u64>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let backend = if args.zookeeper {
        Backend::ZooKeeper
    } else {
        Backend::Redis
    };
    let mut cfg = ChaosConfig::new(args.jobs, backend, args.jobworker);
    cfg.workers = args.workers;
    cfg.concurrency = args.concurrency;
    if let Some(cancels) = args.cancels {
        cfg.cancels = cancels;
    }
    if let Some(expiry) = args.expiry {
        match Duration::try_from_secs_f64(expiry) {
            Ok(d) => cfg.expiry = d,
            Err(_) => {
                eprintln!("chaos: --expiry must be a number of seconds");
                return ExitCode::from(2);
            }
        }
    }
    if let Some(seed) = args.seed {
        cfg.seed = seed;
    }
    if args.appendfsync == "everysec" {
        cfg.appendfsync = Appendfsync::Everysec;
    }
    cfg.dir = args.dir;
    if let Some(secs) = args.settle_timeout {
        cfg.settle_timeout = Duration::from_secs(secs);
    }
    println!(
        "chaos: {} jobs on {}, seed {}, {} workers x {}, expiry {:?}, {} cancels",
        cfg.jobs,
        cfg.backend.name(),
        cfg.seed,
        cfg.workers,
        cfg.concurrency,
        cfg.expiry,
        cfg.cancels
    );
    match chaos::run(&cfg) {
        Ok(report) => {
            print!("{report}");
            if let Some(dir) = &report.dir {
                let _ = std::fs::write(dir.join("report.txt"), report.to_string());
            }
            if report.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("chaos: the run could not start: {e}");
            ExitCode::from(2)
        }
    }
}

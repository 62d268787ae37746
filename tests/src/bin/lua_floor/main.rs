//! `lua_floor`: how far jobworker's Redis scripts are from the floor of the
//! taskflow-compatible layout (see `runtime/lua/README.md`, *The floor*).
//!
//! Starts a private `redis-server` on a free loopback port (stopped by PID
//! on exit) and runs, round by round in a rotated order, N jobs through
//! each of three ways on their own keys of the same server:
//!
//! - `floor`: the least Lua a leased job needs (`floor.rs`);
//! - `ours`: jobworker's scripts through its `RedisBoard` (`post_many`,
//!   `claim` of 50, `consume_many` of 50);
//! - `plain`: Sidekiq-like commands without Lua or lease (`RPUSH` in bulk,
//!   `LPOP` of 50).
//!
//! Per phase it reads the server time of the calls sent (`INFO
//! commandstats`), the server's CPU (`INFO cpu`) and the commands run per
//! job, and prints medians over the rounds with the ratio ours / floor.
//!
//! Run: `cargo run --release -p jobworker-tests --bin lua_floor -- --rounds 11`.

mod floor;
mod meter;
mod ways;

use clap::Parser;
use jobworker::embedded::{RedisServer, ServerOptions};
use jobworker::redis::RedisBoard;

use meter::Figures;
use ways::{Bench, Shape, Way, PHASES};

/// The floor of the taskflow layout, jobworker's scripts and plain
/// commands, side by side.
#[derive(Debug, Parser)]
#[command(name = "lua_floor")]
struct Args {
    /// Rounds; each runs every way once, in a rotated order.
    #[arg(long, default_value_t = 11)]
    rounds: usize,
    /// Jobs per way and round (each is posted, claimed and consumed).
    #[arg(long, default_value_t = 20_000)]
    jobs: usize,
    /// Jobs per post pipeline (one `post_many` call).
    #[arg(long, default_value_t = 1000)]
    chunk: usize,
    /// Jobs per claim call and per consume call (the worker's 50).
    #[arg(long, default_value_t = 50)]
    batch: usize,
    /// Jobs per post script call (the board's POST_BATCH).
    #[arg(long, default_value_t = 100)]
    post_batch: usize,
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = Args::parse();
    if args.rounds == 0 || args.jobs == 0 || args.chunk == 0 || args.batch == 0 || args.post_batch == 0 {
        eprintln!("lua_floor: --rounds, --jobs, --chunk, --batch and --post-batch must be positive");
        std::process::exit(2);
    }
    let server = RedisServer::start(ServerOptions::default()).unwrap_or_else(|e| {
        eprintln!("lua_floor: cannot start a private redis-server: {e}");
        std::process::exit(1)
    });
    let mut bench = connect(&server.url()).await;
    let version = redis_version(&mut bench).await;
    let shape = Shape {
        jobs: args.jobs,
        chunk: args.chunk,
        batch: args.batch,
        post_batch: args.post_batch,
    };
    // figures[way][phase] = one Figures per round.
    let mut figures = vec![vec![Vec::new(); PHASES.len()]; Way::ALL.len()];
    for round in 0..args.rounds {
        for k in 0..Way::ALL.len() {
            let w = (round + k) % Way::ALL.len();
            let got = bench.round(Way::ALL[w], round, shape).await;
            for (p, f) in got.into_iter().enumerate() {
                figures[w][p].push(f);
            }
        }
        eprintln!("lua_floor: round {} of {} done", round + 1, args.rounds);
    }
    println!(
        "Redis {version}, private server (pid {}); {} rounds × {} jobs per way; posts in pipelines of {} \
         ({} per script call), claims and consumes of {} per call; medians [min–max] per job",
        server.pid(),
        args.rounds,
        args.jobs,
        args.chunk,
        args.post_batch,
        args.batch
    );
    print_table(&figures);
    drop(server);
}

async fn connect(url: &str) -> Bench {
    let client = redis::Client::open(url).expect("server url");
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    let mut con = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .expect("connect");
    let meter = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .expect("connect");
    let board = RedisBoard::connect(url).await.expect("RedisBoard::connect");
    let floor = floor::Floor::load(&mut con).await;
    Bench {
        meter,
        con,
        board,
        floor,
    }
}

async fn redis_version(bench: &mut Bench) -> String {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut bench.meter)
        .await
        .expect("INFO server");
    info.lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("?")
        .trim()
        .to_owned()
}

/// (min, median, max) of one figure over the rounds.
fn spread(rounds: &[Figures], get: fn(&Figures) -> f64) -> (f64, f64, f64) {
    let mut v: Vec<f64> = rounds.iter().map(get).collect();
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

fn print_table(figures: &[Vec<Vec<Figures>>]) {
    println!(
        "\n| phase | way | server µs/job | ours/floor | CPU µs/job | ours/floor | commands/job | calls/job | jobs/s |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let server: fn(&Figures) -> f64 = |f| f.server_us;
    let cpu: fn(&Figures) -> f64 = |f| f.cpu_us;
    for (p, phase) in PHASES.iter().enumerate() {
        let floor = (spread(&figures[0][p], server).1, spread(&figures[0][p], cpu).1);
        for (w, way) in Way::ALL.iter().enumerate() {
            let rounds = &figures[w][p];
            if *way == Way::Plain && *phase == "consume" {
                println!(
                    "| {phase} | {} | – (nothing to consume) | | | | | | |",
                    way.label()
                );
                continue;
            }
            let (s, c) = (spread(rounds, server), spread(rounds, cpu));
            println!(
                "| {phase} | {} | {:.2} [{:.2}–{:.2}] | {:.2}× | {:.2} [{:.2}–{:.2}] | {:.2}× | {:.2} | {:.3} | {:.0} |",
                way.label(),
                s.1,
                s.0,
                s.2,
                s.1 / floor.0,
                c.1,
                c.0,
                c.2,
                c.1 / floor.1,
                spread(rounds, |f| f.commands).1,
                spread(rounds, |f| f.calls).1,
                spread(rounds, |f| f.jobs_per_s).1,
            );
        }
    }
    let total = |w: usize, get: fn(&Figures) -> f64| -> f64 {
        (0..PHASES.len()).map(|p| spread(&figures[w][p], get).1).sum()
    };
    println!("\nper job, post + claim + consume (the phases' medians added):");
    for (w, way) in Way::ALL.iter().enumerate() {
        println!(
            "  {:<5}  server {:>6.2} µs ({:.2}× floor)  CPU {:>6.2} µs ({:.2}× floor)  {:>5.2} commands",
            way.label(),
            total(w, server),
            total(w, server) / total(0, server),
            total(w, cpu),
            total(w, cpu) / total(0, cpu),
            total(w, |f| f.commands),
        );
    }
}

//! `lua_bench`: the Lua micro-benchmark (see `jobworker_tests::lua_bench`
//! and `runtime/lua/README.md`). Starts a private `redis-server` on a free loopback
//! port (stopped by PID on exit), then compares the three ways of shipping
//! the shared Lua helpers, interleaved round by round, and prints the
//! median figures per call, their spread and their ratios to today's way.
//!
//! Run: `cargo run --release -p jobworker-tests --bin lua_bench -- --rounds 21`.

use clap::Parser;
use jobworker::embedded::{RedisServer, ServerOptions};
use jobworker_tests::lua_bench::measure::{Bench, Figures};
use jobworker_tests::lua_bench::{Way, HOT_VERBS};

/// Compares EVALSHA of prelude + script, EVALSHA of the included modules
/// + script, and FCALL of one Functions library.
#[derive(Debug, Parser)]
#[command(name = "lua_bench")]
struct Args {
    /// Rounds; each runs every way once, in a rotated order.
    #[arg(long, default_value_t = 21)]
    rounds: usize,
    /// Jobs per way and round (each is posted, claimed, extended, consumed).
    #[arg(long, default_value_t = 2000)]
    jobs: usize,
    /// Calls per pipeline.
    #[arg(long, default_value_t = 50)]
    depth: usize,
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = Args::parse();
    let server = RedisServer::start(ServerOptions::default()).expect("start redis-server");
    let client = redis::Client::open(server.url()).expect("server url");
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    let con = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .expect("connect");
    let (mut bench, costs) = Bench::load(con).await;
    println!("load (20 scripts, or one library of 20 functions):");
    println!(
        "{:>9}  {:>9}  {:>12}  {:>12}  {:>9}",
        "way", "Lua bytes", "VM growth", "kept bytes", "load ms"
    );
    for c in &costs {
        println!(
            "{:>9}  {:>9}  {:>12}  {:>12}  {:>9.2}",
            c.way.label(),
            c.bytes,
            c.vm_bytes,
            c.kept_bytes,
            c.load_us / 1000.0
        );
    }
    // figures[way][verb] = one Figures per round.
    let mut figures = vec![vec![Vec::new(); HOT_VERBS.len()]; Way::ALL.len()];
    for round in 0..args.rounds {
        for k in 0..Way::ALL.len() {
            let w = (round + k) % Way::ALL.len();
            let got = bench.cycle(Way::ALL[w], round, args.jobs, args.depth).await;
            for (v, f) in got.into_iter().enumerate() {
                figures[w][v].push(f);
            }
        }
    }
    println!(
        "\n{} rounds × {} jobs, pipelines of {}; medians [min–max] per call; ratio = median / today's",
        args.rounds, args.jobs, args.depth
    );
    println!(
        "{:>8} {:>9}  {:>22} {:>6}  {:>22} {:>6}  {:>20} {:>6}",
        "verb", "way", "server µs/call", "ratio", "cpu µs/call", "ratio", "calls/s", "ratio"
    );
    for (v, verb) in HOT_VERBS.iter().enumerate() {
        let today = summary(&figures[0][v]);
        for (w, way) in Way::ALL.iter().enumerate() {
            let s = summary(&figures[w][v]);
            println!(
                "{:>8} {:>9}  {:>6.2} [{:>5.2}–{:>5.2}] {:>6.2}  {:>6.2} [{:>5.2}–{:>5.2}] {:>6.2}  {:>6.0} [{:>5.0}–{:>5.0}] {:>6.2}",
                verb,
                way.label(),
                s[0].1,
                s[0].0,
                s[0].2,
                s[0].1 / today[0].1,
                s[1].1,
                s[1].0,
                s[1].2,
                s[1].1 / today[1].1,
                s[2].1,
                s[2].0,
                s[2].2,
                s[2].1 / today[2].1,
            );
        }
    }
    let per_job: Vec<f64> = figures
        .iter()
        .map(|verbs| verbs.iter().map(|rounds| summary(rounds)[0].1).sum())
        .collect();
    print!("\nserver µs per job (the verbs' medians added):");
    for (w, way) in Way::ALL.iter().enumerate() {
        print!(
            "  {} {:.1} ({:.2}×)",
            way.label(),
            per_job[w],
            per_job[w] / per_job[0]
        );
    }
    println!();
    drop(server);
}

/// (min, median, max) of server µs/call, CPU µs/call and calls/s.
fn summary(rounds: &[Figures]) -> [(f64, f64, f64); 3] {
    let pick: [fn(&Figures) -> f64; 3] = [|f| f.usec_per_call, |f| f.cpu_per_call, |f| f.calls_per_s];
    pick.map(|get| {
        let mut v: Vec<f64> = rounds.iter().map(get).collect();
        v.sort_by(f64::total_cmp);
        (v[0], v[v.len() / 2], v[v.len() - 1])
    })
}

//! Loading the three ways and timing the hot verbs' calls.

use std::collections::HashMap;
use std::time::Instant;

use jobworker::redis::QueueKeys;
use redis::aio::MultiplexedConnection;
use redis::Value;

use super::{Way, HOT_VERBS};
use jobworker::redis::lua::library::Library;

/// What loading one way cost the server.
#[derive(Debug, Clone)]
pub struct LoadCost {
    /// The way.
    pub way: Way,
    /// Bytes of Lua sent (20 scripts, or the one library).
    pub bytes: usize,
    /// Growth of the Lua VM (`used_memory_vm_eval` or `_vm_functions`).
    pub vm_bytes: i64,
    /// Growth of the server's script bookkeeping
    /// (`used_memory_scripts_eval` or `used_memory_functions`).
    pub kept_bytes: i64,
    /// Wall time of the loads, µs.
    pub load_us: f64,
}

/// One verb's calls in one round for one way.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    /// `usec_per_call` of EVALSHA or FCALL in `INFO commandstats`.
    pub usec_per_call: f64,
    /// `used_cpu_user + used_cpu_sys` growth over the calls, µs per call.
    pub cpu_per_call: f64,
    /// Calls per second seen by the pipelining client.
    pub calls_per_s: f64,
}

/// The per-way state of a run: EVALSHA digests of the script ways, and
/// the library's names.
pub struct Bench {
    con: MultiplexedConnection,
    shas: HashMap<(&'static str, &'static str), String>,
    library: Library,
}

/// One section of the server's INFO.
pub async fn info(con: &mut MultiplexedConnection, section: &str) -> String {
    redis::cmd("INFO")
        .arg(section)
        .query_async(con)
        .await
        .expect("INFO")
}

/// A numeric `field:value` (or `field=value` inside a line) of INFO.
pub fn field(info: &str, name: &str) -> f64 {
    info.split(['\n', ',', ':'])
        .find_map(|part| {
            part.trim()
                .strip_prefix(name)?
                .strip_prefix('=')
                .map(str::to_owned)
        })
        .or_else(|| {
            info.lines()
                .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':').map(str::to_owned))
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

fn cpu_us(info: &str) -> f64 {
    (field(info, "used_cpu_user") + field(info, "used_cpu_sys")) * 1e6
}

impl Bench {
    /// Measures each way's load, then loads all three.
    pub async fn load(mut con: MultiplexedConnection) -> (Bench, Vec<LoadCost>) {
        let mut costs = Vec::new();
        let mut shas = HashMap::new();
        for way in Way::ALL {
            let _: () = redis::cmd("SCRIPT")
                .arg("FLUSH")
                .query_async(&mut con)
                .await
                .unwrap();
            let _: () = redis::cmd("FUNCTION")
                .arg("FLUSH")
                .query_async(&mut con)
                .await
                .unwrap();
            let before = info(&mut con, "memory").await;
            let started = Instant::now();
            let mut bytes = 0;
            if way == Way::Library {
                let text = Library::new().text;
                bytes = text.len();
                let _: String = redis::cmd("FUNCTION")
                    .arg("LOAD")
                    .arg(&text)
                    .query_async(&mut con)
                    .await
                    .unwrap();
            } else {
                for (verb, _) in jobworker::redis::lua::VERBS {
                    let text = way.script(verb).expect("a script way");
                    bytes += text.len();
                    let _: String = redis::cmd("SCRIPT")
                        .arg("LOAD")
                        .arg(&text)
                        .query_async(&mut con)
                        .await
                        .unwrap();
                }
            }
            let load_us = started.elapsed().as_secs_f64() * 1e6;
            let after = info(&mut con, "memory").await;
            let (vm, kept) = match way {
                Way::Library => ("used_memory_vm_functions", "used_memory_functions"),
                _ => ("used_memory_vm_eval", "used_memory_scripts_eval"),
            };
            let grew = |name| (field(&after, name) - field(&before, name)) as i64;
            costs.push(LoadCost {
                way,
                bytes,
                vm_bytes: grew(vm),
                kept_bytes: grew(kept),
                load_us,
            });
        }
        for way in [Way::Today, Way::Includes] {
            for verb in HOT_VERBS {
                let text = way.script(verb).expect("a script way");
                let sha: String = redis::cmd("SCRIPT")
                    .arg("LOAD")
                    .arg(&text)
                    .query_async(&mut con)
                    .await
                    .unwrap();
                shas.insert((way.label(), verb), sha);
            }
        }
        (
            Bench {
                con,
                shas,
                library: Library::new(),
            },
            costs,
        )
    }

    fn call(&self, way: Way, verb: &'static str, keys: &QueueKeys, args: &[String]) -> redis::Cmd {
        let mut cmd = match way {
            Way::Library => {
                let mut c = redis::cmd("FCALL");
                c.arg(self.library.function(verb));
                c
            }
            _ => {
                let mut c = redis::cmd("EVALSHA");
                c.arg(&self.shas[&(way.label(), verb)]);
                c
            }
        };
        let taken = way.keys(verb);
        cmd.arg(taken.len());
        for k in taken {
            cmd.arg(&keys.keys[k]);
        }
        cmd.arg(keys.prefix())
            .arg(&keys.queue)
            .arg(&keys.events)
            .arg(args);
        cmd
    }

    /// Runs `cmds` pipelined `depth` at a time; the figures and replies.
    async fn phase(&mut self, way: Way, cmds: Vec<redis::Cmd>, depth: usize) -> (Figures, Vec<Value>) {
        let con = &mut self.con;
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(con)
            .await
            .unwrap();
        let cpu0 = cpu_us(&info(con, "cpu").await);
        let started = Instant::now();
        let mut replies = Vec::with_capacity(cmds.len());
        for chunk in cmds.chunks(depth) {
            let mut pipe = redis::pipe();
            for c in chunk {
                pipe.add_command(c.clone());
            }
            let got: Vec<Value> = pipe.query_async(con).await.expect("a pipelined call failed");
            replies.extend(got);
        }
        let wall = started.elapsed().as_secs_f64();
        let cpu1 = cpu_us(&info(con, "cpu").await);
        let stats = info(con, "commandstats").await;
        let name = if way == Way::Library {
            "cmdstat_fcall"
        } else {
            "cmdstat_evalsha"
        };
        let line = stats.lines().find(|l| l.starts_with(name)).unwrap_or_default();
        let n = replies.len() as f64;
        let figures = Figures {
            usec_per_call: field(line, "usec_per_call"),
            cpu_per_call: (cpu1 - cpu0) / n,
            calls_per_s: n / wall,
        };
        (figures, replies)
    }

    /// One job's life for `jobs` jobs on `way`'s queue: every hot verb's
    /// figures, in [`HOT_VERBS`] order. Panics when a call did not do its
    /// work (a post not ready, a claim of no job, a refused lease).
    pub async fn cycle(&mut self, way: Way, round: usize, jobs: usize, depth: usize) -> Vec<Figures> {
        let ns = format!("jw:{{bench-{}}}", way.label());
        let keys = QueueKeys::new(&format!("bench-{}", way.label()), &ns, "jw");
        let ids: Vec<String> = (0..jobs)
            .map(|k| format!("{}-{round}-{k}", way.label()))
            .collect();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let week = (7 * 86_400_000u64).to_string();
        let mut out = Vec::new();
        for verb in HOT_VERBS {
            let cmds = ids
                .iter()
                .map(|id| {
                    let args = match verb {
                        "post" => s(&[
                            &keys.notify,
                            "each",
                            id,
                            "\u{82}",
                            "x",
                            "0",
                            "3",
                            "0",
                            "bench",
                            "",
                            "1",
                        ]),
                        "claim" => s(&[
                            "w", "30000", "1", "1", "1000", &week, "1000", &week, "0", "0", "0", "0",
                        ]),
                        "extend" => s(&[id, "w", "0", "30000"]),
                        _ => s(&["1000", id, "w", "0"]),
                    };
                    self.call(way, verb, &keys, &args)
                })
                .collect();
            let (figures, replies) = self.phase(way, cmds, depth).await;
            for reply in &replies {
                check(verb, reply);
            }
            out.push(figures);
        }
        out
    }
}

/// The reply shows the call did its work.
fn check(verb: &str, reply: &Value) {
    let Value::Array(items) = reply else {
        panic!("{verb}: reply {reply:?}")
    };
    let text = |k: usize| match items.get(k) {
        Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
        Some(Value::SimpleString(s)) => s.clone(),
        Some(Value::Int(n)) => n.to_string(),
        other => format!("{other:?}"),
    };
    let ok = match verb {
        "post" => text(1) == "ready",
        "claim" => text(2) == "1",
        "extend" => text(0) == "ok",
        _ => text(1) == "ok",
    };
    assert!(ok, "{verb} did not do its work: {items:?}");
}

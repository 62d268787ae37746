"""RQ peer benchmark for scripts/bench-peers.

    python bench.py --redis redis://127.0.0.1:PORT --jobs N --concurrency 50

Progress goes to stderr; the last stdout line is one JSON object.
RQ has no in-process concurrency: the drain uses 2 SimpleWorker (no fork)
processes, each started as `python bench.py --worker ...` (so workers import
the job functions below as `bench.noop` / `bench.pickup`); --concurrency is
recorded but unused.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # workers import this file as `bench`; keep the source tree clean

from redis import Redis
from rq import Queue, SimpleWorker, Worker, get_current_job
from rq.version import VERSION

WORKERS = 2
PICKUP_JOBS = 200
PICKUP_GAP_S = 0.020
BULK_CHUNK = 1000


# --- job functions (run inside the workers) ---------------------------------
def noop(i):
    return None


def pickup(posted_ms, key):
    get_current_job().connection.rpush(key, time.time() * 1000 - posted_ms)


# --- helpers -----------------------------------------------------------------
def log(msg):
    print(f"[rq] {msg}", file=sys.stderr, flush=True)


def redis_counters(r):
    cpu, stats = r.info("cpu"), r.info("stats")
    return cpu["used_cpu_sys"] + cpu["used_cpu_user"], stats["total_commands_processed"]


def proc_mib(path, field):
    """A "<field>: N kB" line of a /proc file, in MiB (None once the process is gone)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return None


def percentiles(xs):
    s = sorted(xs)
    at = lambda q: s[max(0, math.ceil(q * len(s)) - 1)]
    return {k: round(at(q), 3) for k, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))}


def cleanup(r, q, *keys):
    """Delete the queue, its finished jobs and their results (kept by RQ's default result_ttl)."""
    reg = q.finished_job_registry
    ids = reg.get_job_ids()
    for i in range(0, len(ids), 1000):
        r.delete(*[k for jid in ids[i : i + 1000] for k in (f"rq:job:{jid}", f"rq:results:{jid}")])
    r.delete(reg.key, *keys)
    q.delete(delete_jobs=True)


def start_workers(url, queue, burst):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--redis", url, "--queue", queue]
    return [subprocess.Popen(cmd + (["--burst"] if burst else [])) for _ in range(WORKERS)]


def run_worker(url, queue, burst):
    r = Redis.from_url(url)
    w = SimpleWorker([Queue(queue, connection=r)], connection=r)
    w.work(burst=burst, logging_level="WARNING")  # no per-job INFO log lines


# --- benchmark ---------------------------------------------------------------
def bench(url, n, concurrency):
    r = Redis.from_url(url)
    name = f"bench-{os.getpid()}-{int(time.time() * 1000)}"
    q = Queue(name, connection=r)

    # 1. enqueue, one call at a time.
    t0 = time.perf_counter()
    for i in range(n):
        q.enqueue("bench.noop", i)
    enqueue_one = n / (time.perf_counter() - t0)
    log(f"enqueue one-by-one: {enqueue_one:.0f}/s")
    q.empty()

    # 2. bulk enqueue, then drain with 2 burst workers; Redis counters span both.
    cpu0, cmd0 = redis_counters(r)
    t0 = time.perf_counter()
    for i in range(0, n, BULK_CHUNK):
        q.enqueue_many([Queue.prepare_data("bench.noop", (j,)) for j in range(i, min(n, i + BULK_CHUNK))])
    enqueue_bulk = n / (time.perf_counter() - t0)
    log(f"enqueue bulk: {enqueue_bulk:.0f}/s")

    t0 = time.perf_counter()
    procs = start_workers(url, name, burst=True)
    rss, pss_peak = None, None
    while any(p.poll() is None for p in procs):
        r_s = [proc_mib(f"/proc/{p.pid}/status", "VmRSS") for p in procs]
        p_s = [proc_mib(f"/proc/{p.pid}/smaps_rollup", "Pss") for p in procs]
        if None not in r_s:
            rss = sum(r_s)  # last sample taken while both workers were alive
        if None not in p_s:
            pss_peak = max(pss_peak or 0, sum(p_s))
        time.sleep(0.05)
    drain = n / (time.perf_counter() - t0)
    cpu1, cmd1 = redis_counters(r)
    finished = q.finished_job_registry.count
    if finished != n:
        log(f"warning: {finished}/{n} jobs in the finished registry")
    log(f"drain: {drain:.0f}/s")

    # 3. pickup latency: 2 idle (blocking) workers, jobs posted one at a time.
    key = f"{name}:pickup"
    procs = start_workers(url, name, burst=False)
    deadline = time.time() + 10
    while Worker.count(connection=r, queue=q) < WORKERS and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    for _ in range(PICKUP_JOBS):
        q.enqueue("bench.pickup", time.time() * 1000, key)
        time.sleep(PICKUP_GAP_S)
    deadline = time.time() + 10
    while r.llen(key) < PICKUP_JOBS and time.time() < deadline:
        time.sleep(0.05)
    pickups = [float(x) for x in r.lrange(key, 0, -1)]
    if len(pickups) < PICKUP_JOBS:
        log(f"only {len(pickups)}/{PICKUP_JOBS} pickup jobs ran")
    for p in procs:
        p.terminate()  # SIGTERM = RQ warm shutdown
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
    cleanup(r, q, key)

    return {
        "system": "rq",
        "version": VERSION,
        "jobs": n,
        "concurrency": concurrency,
        "workers": WORKERS,
        "worker_class": "SimpleWorker",
        "enqueue_one_per_s": round(enqueue_one, 1),
        "enqueue_bulk_per_s": round(enqueue_bulk, 1),
        "drain_per_s": round(drain, 1),
        "pickup_ms": percentiles(pickups),
        "redis_cpu_us_per_job": round((cpu1 - cpu0) * 1e6 / n, 1),
        "commands_per_job": round((cmd1 - cmd0) / n, 2),
        "worker_mem_mib": None if rss is None else round(rss, 1),
        "mem_kind": "rss",
        "worker_pss_mib": None if pss_peak is None else round(pss_peak, 1),  # peak, summed
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis", default="redis://127.0.0.1:6379")
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--queue", help=argparse.SUPPRESS)
    ap.add_argument("--burst", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        run_worker(a.redis, a.queue, a.burst)
    else:
        print(json.dumps(bench(a.redis, a.jobs, a.concurrency)), flush=True)


if __name__ == "__main__":
    main()

"""taskflow's own job boards as a peer (scripts/bench-zookeeper).

    python bench.py --backend redis --redis redis://127.0.0.1:PORT --jobs N --concurrency C
    python bench.py --backend zookeeper --zookeeper 127.0.0.1:PORT --jobs N --concurrency C

Run it with the python of a venv holding taskflow 6.5.0, redis and kazoo
(target/taskflow-venv, see tests/src/support/python.rs). The boards come from
`taskflow.jobs.backends.fetch` (RedisJobBoard, ZookeeperJobBoard), on a fresh
namespace (Redis) or path (ZooKeeper) per run, removed afterwards.

1. enqueue one by one: `board.post` N times from one thread, timed over
   the first min(N, 2000) like `jobworker bench` (taskflow's ZooKeeper
   post slows down as the board grows: the poster's own ChildrenWatch
   re-lists every job on each post; 2000 jobs: 82-488/s, 5000: 23/s).
2. drain: --workers processes (default 2, like jobworker's `--workers 2`),
   each with one board shared by --concurrency threads (default 50, like
   jobworker's `--concurrency 50`). Processes, because one Python process
   is bound to one core by the GIL; threads inside each, because they share
   the process's board (one connection pool, and on ZooKeeper one kazoo
   session with one cached listing) instead of one board per claimer. Each
   thread runs taskflow's claim loop: `iterjobs(only_unclaimed=True)`, then
   `claim(job, owner)` (on Redis with a --expiry lease) and `consume(job,
   owner)`, pass after pass, until the board holds no job. That is the
   default --mode conductor (taskflow's NonBlockingConductor shape: one
   claim loop per process, --concurrency threads consuming); --mode
   claimers, every thread its own claim loop, is far slower (2 x 50, 1000
   jobs on Redis: 33 jobs/s against 625), as every claimer walks the same
   listing in the same order and loses most races. The workers
   connect (and on ZooKeeper load the listing) before the clock starts.
   Pickup latency is not measured: taskflow's boards have no blocking claim
   (Redis `wait` polls HLEN with back-off), so it would measure the poll.
3. on Redis, `INFO` deltas over post + drain: server CPU µs/job and
   commands/job.

Progress goes to stderr; the last stdout line is one JSON object. Exits
non-zero when the drain did not consume every job or timed out.
"""

import argparse
import concurrent.futures
import importlib.metadata
import json
import multiprocessing
import os
import sys
import threading
import time
import urllib.parse

sys.dont_write_bytecode = True

from taskflow import exceptions as exc
from taskflow.jobs import backends


ENQUEUE_TIMED = 2000  # posts timed, like `jobworker bench`


def log(msg):
    print(f"[taskflow] {msg}", file=sys.stderr, flush=True)


def board_conf(a, space):
    """The fetch() configuration of a fresh board named by `space`."""
    if a.backend == "redis":
        u = urllib.parse.urlparse(a.redis)
        conf = {"board": "redis", "host": u.hostname or "127.0.0.1", "port": u.port or 6379, "namespace": space}
        if u.path.strip("/"):
            conf["db"] = int(u.path.strip("/"))
        return conf
    return {"board": "zookeeper", "hosts": a.zookeeper, "path": f"/{space}/jobs", "check_compatible": False}


def connect(conf, tag):
    board = backends.fetch(f"bench-{tag}", dict(conf))
    board.connect()
    return board


def remaining(board):
    """Jobs still on the board, read from the server (not a cache)."""
    if hasattr(board, "listings_key"):
        return board._client.hlen(board.listings_key)
    kids = board._client.get_children(board.path)
    return sum(1 for k in kids if k.startswith(board.JOB_PREFIX) and not k.endswith(board.LOCK_POSTFIX))


def claim(board, job, owner, expiry):
    """taskflow's claim; False when another claimer won the job."""
    try:
        if hasattr(board, "listings_key"):
            board.claim(job, owner, expiry=expiry)
        else:
            board.claim(job, owner)  # ZooKeeper claims have no expiry
        return True
    except (exc.UnclaimableJob, exc.NotFound):
        return False


def until_empty(board, one_pass):
    """Runs claim passes until one takes nothing and the board holds no job."""
    while not one_pass():
        if remaining(board) == 0:
            return
        time.sleep(0.002)  # others hold the rest: look again shortly


def claimer(board, owner, expiry, tally):
    """--mode claimers: one thread's iterjobs / claim / consume loop."""

    def one_pass():
        took = False
        for job in board.iterjobs(only_unclaimed=True):
            if not claim(board, job, owner, expiry):
                tally.lost()
                continue
            board.consume(job, owner)
            tally.done()
            took = True
        return took

    until_empty(board, one_pass)


def conductor(board, owner, expiry, slots, tally):
    """--mode conductor: like taskflow's NonBlockingConductor, one dispatch
    loop claims while fewer than `slots` jobs run, and a pool of `slots`
    threads consumes each claimed job (the no-op job's whole run)."""
    free = threading.BoundedSemaphore(slots)
    pool = concurrent.futures.ThreadPoolExecutor(slots)

    def run(job):
        try:
            board.consume(job, owner)
            tally.done()
        finally:
            free.release()

    def one_pass():
        took = False
        for job in board.iterjobs(only_unclaimed=True):
            free.acquire()
            if not claim(board, job, owner, expiry):
                free.release()
                tally.lost()
                continue
            pool.submit(run, job)
            took = True
        return took

    until_empty(board, one_pass)
    pool.shutdown(wait=True)


class Tally:
    """Jobs consumed and claims lost to another claimer, across threads."""

    def __init__(self):
        self.lock, self.consumed, self.conflicts = threading.Lock(), 0, 0

    def done(self):
        with self.lock:
            self.consumed += 1

    def lost(self):
        with self.lock:
            self.conflicts += 1


def worker_process(conf, mode, index, threads, expiry, jobs, ready, go, results):
    """One worker process: connect, load the listing, then `threads` claimers."""
    board = connect(conf, f"w{index}")
    if not hasattr(board, "listings_key"):
        deadline = time.time() + 120
        while board.job_count < jobs and time.time() < deadline:
            time.sleep(0.01)  # the ChildrenWatch fills the cache asynchronously
    ready.wait()
    go.wait()
    tally, owner = Tally(), f"bench-{os.getpid()}"
    if mode == "conductor":
        conductor(board, owner, expiry, threads, tally)
    else:
        ts = [threading.Thread(target=claimer, args=(board, f"{owner}-{t}", expiry, tally)) for t in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    board.close()
    results.put((tally.consumed, tally.conflicts))


def redis_counters(board):
    if not hasattr(board, "listings_key"):
        return None
    info = board._client.info()
    return info["used_cpu_sys"] + info["used_cpu_user"], info["total_commands_processed"]


def drain(a, conf, poster):
    """Starts the workers, releases them at once, waits; returns (jobs/s, consumed, conflicts)."""
    ctx = multiprocessing.get_context("spawn")
    ready, go, results = ctx.Barrier(a.workers + 1), ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=worker_process, args=(conf, a.mode, i, a.concurrency, a.expiry, a.jobs, ready, go, results))
        for i in range(a.workers)
    ]
    for p in procs:
        p.start()
    ready.wait(timeout=180)
    log(f"drain: {a.workers} processes x {a.concurrency} ({a.mode}) connected; go")
    t0 = time.perf_counter()
    go.set()
    deadline, last_log = t0 + a.timeout, t0
    while any(p.is_alive() for p in procs):
        now = time.perf_counter()
        if now > deadline:
            for p in procs:
                p.terminate()
            raise SystemExit(f"[taskflow] drain timed out after {a.timeout}s ({remaining(poster)} jobs left)")
        if now - last_log >= 5:
            last_log = now
            log(f"drain: {remaining(poster)} left after {now - t0:.0f}s")
        time.sleep(0.005)
    elapsed = time.perf_counter() - t0
    got = [results.get(timeout=10) for _ in procs]
    if any(p.exitcode != 0 for p in procs):
        raise SystemExit(f"[taskflow] a worker process failed: exit codes {[p.exitcode for p in procs]}")
    return a.jobs / elapsed, sum(g[0] for g in got), sum(g[1] for g in got)


def cleanup(a, board, space):
    if a.backend == "redis":
        board._client.delete(board.listings_key, board.sequence_key, board.trash_key)
    else:
        board._client.delete(f"/{space}", recursive=True)


def bench(a):
    space = f"taskflow-bench-{os.getpid()}-{int(time.time() * 1000)}"
    conf = board_conf(a, space)
    board = connect(conf, "poster")
    try:
        c0 = redis_counters(board)
        timed = min(a.jobs, ENQUEUE_TIMED)
        t0 = time.perf_counter()
        for i in range(a.jobs):
            board.post("bench-noop", details={"i": i})
            if i + 1 == timed:
                enqueue_one = timed / (time.perf_counter() - t0)
                log(f"enqueue one by one: {enqueue_one:.0f}/s (first {timed})")
        rate, consumed, conflicts = drain(a, conf, board)
        c1 = redis_counters(board)
        log(f"drain: {rate:.0f}/s ({conflicts} lost claim races)")
        if consumed != a.jobs or remaining(board) != 0:
            raise SystemExit(f"[taskflow] consumed {consumed} of {a.jobs}; {remaining(board)} left")
    finally:
        cleanup(a, board, space)
        board.close()
    out = {
        "system": f"taskflow-{a.backend}",
        "version": importlib.metadata.version("taskflow"),
        "jobs": a.jobs,
        "workers": a.workers,
        "concurrency": a.concurrency,
        "mode": a.mode,
        "worker_kind": "processes x threads (one board per process)",
        "enqueue_one_per_s": round(enqueue_one, 1),
        "enqueue_timed_jobs": timed,
        "drain_per_s": round(rate, 1),
        "lost_claims_per_job": round(conflicts / a.jobs, 2),
    }
    if c0 and c1:
        out["redis_cpu_us_per_job"] = round((c1[0] - c0[0]) * 1e6 / a.jobs, 1)
        out["commands_per_job"] = round((c1[1] - c0[1]) / a.jobs, 2)
        out["claim_expiry_s"] = a.expiry
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["redis", "zookeeper"], required=True)
    ap.add_argument("--redis", default="redis://127.0.0.1:6379")
    ap.add_argument("--zookeeper", default="127.0.0.1:2181", help="HOST:PORT")
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=2, help="worker processes")
    ap.add_argument("--concurrency", type=int, default=50, help="jobs at once per worker process")
    ap.add_argument(
        "--mode",
        choices=["conductor", "claimers"],
        default="conductor",
        help="conductor: one claim loop + --concurrency consuming threads per process; "
        "claimers: --concurrency threads each running the whole claim loop",
    )
    ap.add_argument("--expiry", type=float, default=30.0, help="Redis claim expiry, s (ZooKeeper claims have none)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="give up the drain after this many s")
    a = ap.parse_args()
    if a.jobs < 1 or a.workers < 1 or a.concurrency < 1:
        ap.error("--jobs, --workers and --concurrency must be positive")
    print(json.dumps(bench(a)), flush=True)


if __name__ == "__main__":
    main()

# Sidekiq peer benchmark for scripts/bench-peers.
#
#   ruby bench.rb --redis redis://127.0.0.1:PORT --jobs N --processes 1 --concurrency 25
#
# Progress goes to stderr; the last stdout line is one JSON object, system
# "sidekiq" for 1 process x 25 threads, "sidekiq-PxC" for any other shape.
# The workers are real `sidekiq` CLI processes (-r jobs.rb), forked as
# children; Sidekiq's basic fetch (BRPOP, no lease: a killed worker loses
# the jobs it holds), per-job log lines off (level WARN) as for the others.
#
# What is measured, and how it matches `jobworker bench`:
# - enqueue one by one: Sidekiq::Client.push, sequentially (one pipelined
#   SADD + LPUSH round trip each);
# - enqueue bulk: Sidekiq::Client.push_bulk, 1,000 jobs per call;
# - drain, workers already running: jobworker quiets its running workers
#   (SIGTSTP), posts, resumes them (SIGCONT) and times until the queue is
#   empty. A quiet Sidekiq 6 does not resume, so here the processes are
#   started, registered (ProcessSet) and warmed up (a few hundred no-op
#   jobs), the jobs are bulk-posted to a side list no worker reads, and one
#   RENAME makes that list the queue: that wakes the idle BRPOPs at once,
#   and the clock runs from the RENAME to the last job finished. Finished
#   jobs are counted by a server middleware and flushed to a Redis counter
#   every 5 ms per process (jobs.rb), so the end is known to within ~5 ms;
#   those flushes (a few hundred INCRBYs per drain) and the 5 ms polling of
#   this script are in the commands and Redis CPU per job, as the polling
#   of `jobworker bench` is in its own;
# - drain including start-up: the jobs are queued first, then the processes
#   are started; the clock runs from the spawn to the last job finished
#   (Ruby and Sidekiq boot included, like jobworker's
#   drain_incl_startup_per_s);
# - pickup latency: 200 probes posted one at a time 20 ms apart to idle
#   workers; the job body pushes now - posted (ms) to a Redis list;
# - Redis CPU (used_cpu_sys + used_cpu_user) and total_commands_processed
#   deltas over bulk post + drain (the first one), divided by jobs;
# - memory: peak over the drain of the summed RSS and the summed PSS of the
#   sidekiq processes, sampled every 100 ms.
require "json"
require "optparse"
require "securerandom"
require "sidekiq"
require "sidekiq/api"
require "redis"

PICKUP_JOBS = 200
PICKUP_GAP_S = 0.020
BULK_CHUNK = 1000
PHASE_LIMIT_S = 600
JOBS_RB = File.expand_path("jobs.rb", __dir__)

opts = { redis: "redis://127.0.0.1:6379", jobs: 20_000, processes: 1, concurrency: 25 }
OptionParser.new do |o|
  o.banner = "usage: ruby bench.rb [--redis URL] [--jobs N] [--processes P] [--concurrency C]"
  o.on("--redis URL") { |v| opts[:redis] = v }
  o.on("--jobs N", Integer) { |v| opts[:jobs] = v }
  o.on("--processes P", Integer) { |v| opts[:processes] = v }
  o.on("--concurrency C", Integer) { |v| opts[:concurrency] = v }
end.parse!
N = opts[:jobs]
P = opts[:processes]
C = opts[:concurrency]
URL = opts[:redis]
SYSTEM = P == 1 && C == 25 ? "sidekiq" : "sidekiq-#{P}x#{C}"

$stderr.sync = true
def log(msg) = warn("[#{SYSTEM}] #{msg}")
def mono = Process.clock_gettime(Process::CLOCK_MONOTONIC)
def now_ms = Process.clock_gettime(Process::CLOCK_REALTIME, :float_millisecond)

Sidekiq.logger.level = Logger::WARN
# Debian pairs Sidekiq 6.4 with redis-rb 4.8, which prints a deprecation
# warning on every BRPOP and SADD Sidekiq sends; those lines would cost more
# than the jobs.
Redis.silence_deprecations = true
Sidekiq.configure_client { |c| c.redis = { url: URL, size: 2 } }
R = Redis.new(url: URL)

def redis_counters
  cpu = R.info("cpu")
  stats = R.info("stats")
  [cpu["used_cpu_sys"].to_f + cpu["used_cpu_user"].to_f, stats["total_commands_processed"].to_i]
end

# A "<field>: N kB" line of a /proc file, in MiB (nil once the process is gone).
def proc_mib(path, field)
  File.foreach(path) { |l| return l.split[1].to_i / 1024.0 if l.start_with?("#{field}:") }
  nil
rescue Errno::ENOENT, Errno::ESRCH
  nil
end

def percentiles(xs)
  s = xs.sort
  at = ->(q) { s[[0, (q * s.size).ceil - 1].max] }
  { p50: at.(0.5).round(3), p90: at.(0.9).round(3), p99: at.(0.99).round(3) }
end

# Polls the block every `every` s until it is true; raises after PHASE_LIMIT_S.
def wait_until(what, every = 0.005)
  deadline = mono + PHASE_LIMIT_S
  until yield
    raise "timed out waiting for #{what}" if mono > deadline
    sleep every
  end
end

queue = "bench-#{Process.pid}-#{(now_ms).to_i}"
hold = "#{queue}-hold" # no worker reads queue:<hold>
done_key = "#{queue}:done"
tag = "#{queue}-#{SecureRandom.hex(3)}"
$children = []

def start_sidekiqs(queue, tag, done_key)
  env = { "REDIS_URL" => URL, "BENCH_DONE_KEY" => done_key }
  cmd = ["sidekiq", "-r", JOBS_RB, "-c", C.to_s, "-q", queue, "-g", tag, "-t", "5", "-e", "production"]
  pids = Array.new(P) { Process.spawn(env, *cmd, out: :err, in: File::NULL) }
  $children.concat(pids)
  pids
end

def stop_sidekiqs(pids)
  pids.each { |pid| Process.kill("TERM", pid) rescue nil }
  pids.each do |pid|
    deadline = mono + 30
    while Process.waitpid(pid, Process::WNOHANG).nil?
      if mono > deadline
        Process.kill("KILL", pid) rescue nil
        Process.waitpid(pid) rescue nil
        break
      end
      sleep 0.02
    end
  rescue Errno::ECHILD
    nil
  ensure
    $children.delete(pid)
  end
end

def check_alive(pids)
  pids.each do |pid|
    next unless Process.waitpid(pid, Process::WNOHANG)

    $children.delete(pid)
    raise "sidekiq process #{pid} exited (#{$?})"
  end
  nil
end

def push_bulk(queue, from, to)
  (from...to).each_slice(BULK_CHUNK) do |slice|
    Sidekiq::Client.push_bulk("class" => "NoopJob", "queue" => queue, "args" => slice.map { |i| [i] })
  end
end

def done(done_key) = R.get(done_key).to_i

begin
  # 1. enqueue, one push at a time.
  t0 = mono
  N.times { |i| Sidekiq::Client.push("class" => "NoopJob", "queue" => hold, "args" => [i]) }
  enqueue_one = N / (mono - t0)
  log(format("enqueue one-by-one: %.0f/s", enqueue_one))
  R.del("queue:#{hold}")

  # 2. start the workers, wait until all are registered and warmed up.
  pids = start_sidekiqs(queue, tag, done_key)
  wait_until("#{P} sidekiq processes to register", 0.05) do
    check_alive(pids)
    Sidekiq::ProcessSet.new(false).count { |p| p["tag"] == tag } == P
  end
  warm = P * C * 4
  R.set(done_key, 0)
  push_bulk(queue, 0, warm)
  wait_until("the warm-up jobs") { check_alive(pids) || done(done_key) >= warm }
  sleep 0.3 # every fetcher back in BRPOP
  R.set(done_key, 0)

  # 3. bulk enqueue to the side list, RENAME it to the queue, drain; the
  #    Redis counters span both.
  cpu0, cmd0 = redis_counters
  t0 = mono
  push_bulk(hold, 0, N)
  enqueue_bulk = N / (mono - t0)
  log(format("enqueue bulk: %.0f/s", enqueue_bulk))

  rss_peak = 0.0
  pss_peak = 0.0
  last_sample = 0.0
  t0 = mono
  R.rename("queue:#{hold}", "queue:#{queue}")
  wait_until("the drain") do
    if mono - last_sample >= 0.1
      last_sample = mono
      check_alive(pids)
      rss = pids.map { |p| proc_mib("/proc/#{p}/status", "VmRSS") }
      pss = pids.map { |p| proc_mib("/proc/#{p}/smaps_rollup", "Pss") }
      rss_peak = [rss_peak, rss.sum].max unless rss.include?(nil)
      pss_peak = [pss_peak, pss.sum].max unless pss.include?(nil)
    end
    done(done_key) >= N
  end
  drain = N / (mono - t0)
  cpu1, cmd1 = redis_counters
  log(format("drain (%dx%d, workers running): %.0f/s", P, C, drain))

  # 4. pickup latency: idle workers, probes posted one at a time.
  key = "#{queue}:pickup"
  sleep 0.3
  PICKUP_JOBS.times do
    Sidekiq::Client.push("class" => "PickupJob", "queue" => queue, "args" => [now_ms, key])
    sleep PICKUP_GAP_S
  end
  deadline = mono + 10
  sleep 0.05 while R.llen(key) < PICKUP_JOBS && mono < deadline
  pickups = R.lrange(key, 0, -1).map(&:to_f)
  log("only #{pickups.size}/#{PICKUP_JOBS} pickup jobs ran") if pickups.size < PICKUP_JOBS
  raise "no pickup probe ran" if pickups.empty?
  stop_sidekiqs(pids)

  # 5. drain including start-up: jobs queued first, then the processes start.
  push_bulk(queue, 0, N)
  R.set(done_key, 0)
  t0 = mono
  pids = start_sidekiqs(queue, tag, done_key)
  wait_until("the drain including start-up") { check_alive(pids) || done(done_key) >= N }
  drain_startup = N / (mono - t0)
  log(format("drain including start-up: %.0f/s", drain_startup))
  stop_sidekiqs(pids)

  R.del("queue:#{queue}", "queue:#{hold}", key, done_key)
  R.srem("queues", [queue, hold])

  puts JSON.generate(
    system: SYSTEM,
    version: Sidekiq::VERSION,
    ruby: RUBY_VERSION,
    redis_gem: Redis::VERSION,
    jobs: N,
    workers: P,
    concurrency: C,
    fetch: "basic (BRPOP, no lease)",
    enqueue_one_per_s: enqueue_one.round(1),
    enqueue_bulk_per_s: enqueue_bulk.round(1),
    drain_per_s: drain.round(1),
    drain_incl_startup_per_s: drain_startup.round(1),
    pickup_ms: percentiles(pickups),
    redis_cpu_us_per_job: ((cpu1 - cpu0) * 1e6 / N).round(1),
    commands_per_job: ((cmd1 - cmd0).to_f / N).round(2),
    worker_mem_mib: rss_peak.round(1),
    mem_kind: "rss",
    worker_rss_mib: rss_peak.round(1),
    worker_pss_mib: pss_peak.round(1),
  )
ensure
  $children.each { |pid| Process.kill("KILL", pid) rescue nil }
  $children.each { |pid| Process.waitpid(pid) rescue nil }
end

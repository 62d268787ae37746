# Job classes for the Sidekiq peer benchmark, loaded by each worker process
# as `sidekiq -r /abs/path/jobs.rb -c C -q QUEUE` (see bench.rb).
#
# Completions are counted in process (a server middleware) and added to the
# Redis counter $BENCH_DONE_KEY by one flusher thread every 5 ms, so that
# bench.rb can tell when a drain is over without a Redis write per job.
# Sidekiq's own "processed" stat is only flushed by the 5-second heartbeat.
require "sidekiq"
require "redis"

Sidekiq.logger.level = Logger::WARN # no per-job start/done log lines
# Debian pairs Sidekiq 6.4 with redis-rb 4.8, which prints a deprecation
# warning on every BRPOP and SADD Sidekiq sends; those lines would cost more
# than the jobs.
Redis.silence_deprecations = true

# Counts finished jobs and flushes the count to Redis every 5 ms.
class BenchCounter
  FLUSH_EVERY_S = 0.005
  @done = 0
  @mutex = Mutex.new

  class << self
    def inc
      @mutex.synchronize { @done += 1 }
    end

    def start_flusher(url, key)
      return unless key

      redis = Redis.new(url: url)
      flushed = 0
      Thread.new do
        loop do
          done = @mutex.synchronize { @done }
          if done > flushed
            redis.incrby(key, done - flushed)
            flushed = done
          end
          sleep FLUSH_EVERY_S
        end
      end
    end
  end

  def call(_worker, _job, _queue)
    yield
  ensure
    self.class.inc
  end
end

Sidekiq.configure_server do |config|
  config.logger.level = Logger::WARN
  config.server_middleware { |chain| chain.add BenchCounter }
  config.on(:startup) { BenchCounter.start_flusher(ENV.fetch("REDIS_URL"), ENV["BENCH_DONE_KEY"]) }
end

# The drained job: does nothing.
class NoopJob
  include Sidekiq::Worker

  def perform(_i); end
end

# A pickup probe: records now - posted (ms, wall clock) into the list `key`.
class PickupJob
  include Sidekiq::Worker

  def perform(posted_ms, key)
    waited = Process.clock_gettime(Process::CLOCK_REALTIME, :float_millisecond) - posted_ms
    Sidekiq.redis { |conn| conn.rpush(key, waited) }
  end
end

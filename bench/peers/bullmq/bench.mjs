// BullMQ peer benchmark for scripts/bench-peers.
//   node bench.mjs --redis redis://127.0.0.1:PORT --jobs N --concurrency 50
// Progress goes to stderr; the last stdout line is one JSON object.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';
import { Queue, Worker } from 'bullmq';
import IORedis from 'ioredis';

const { values: args } = parseArgs({
  options: {
    redis: { type: 'string', default: 'redis://127.0.0.1:6379' },
    jobs: { type: 'string', default: '20000' },
    concurrency: { type: 'string', default: '50' },
  },
});
const N = Number(args.jobs);
const CONCURRENCY = Number(args.concurrency);
const PICKUP_JOBS = 200;
const PICKUP_GAP_MS = 20;
const BULK_CHUNK = 1000;

const url = new URL(args.redis);
const connection = {
  host: url.hostname,
  port: Number(url.port || 6379),
  db: Number(url.pathname.slice(1) || 0),
  ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
};
const version = createRequire(import.meta.url)('bullmq/package.json').version;
const log = (...m) => console.error('[bullmq]', ...m);
const nowMs = () => performance.timeOrigin + performance.now();
const sleep = (ms, unref = false) =>
  new Promise((r) => { const t = setTimeout(r, ms); if (unref) t.unref(); });

const admin = new IORedis(args.redis);
async function redisCounters() {
  const num = (text, key) => Number(text.match(new RegExp(`^${key}:([0-9.]+)`, 'm'))[1]);
  const cpu = await admin.info('cpu');
  const stats = await admin.info('stats');
  return {
    cpuS: num(cpu, 'used_cpu_sys') + num(cpu, 'used_cpu_user'),
    commands: num(stats, 'total_commands_processed'),
  };
}

// Proportional set size, for comparison with systems that report PSS.
function pssMiB() {
  try {
    const m = readFileSync('/proc/self/smaps_rollup', 'utf8').match(/^Pss:\s+(\d+) kB/m);
    return m ? Number(m[1]) / 1024 : null;
  } catch {
    return null;
  }
}

function percentiles(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q) => s[Math.max(0, Math.ceil(q * s.length) - 1)];
  const r3 = (x) => Math.round(x * 1000) / 1000;
  return { p50: r3(at(0.5)), p90: r3(at(0.9)), p99: r3(at(0.99)) };
}

const queueName = `bench-${process.pid}-${Date.now()}`;
const queue = new Queue(queueName, { connection });
await queue.waitUntilReady();

// 1. enqueue, one awaited add() at a time.
let t0 = performance.now();
for (let i = 0; i < N; i++) await queue.add('noop', { i });
const enqueueOne = N / ((performance.now() - t0) / 1000);
log(`enqueue one-by-one: ${enqueueOne.toFixed(0)}/s`);
await queue.obliterate({ force: true });

// 1b. enqueue from CONCURRENCY tasks at once, each awaiting one add() at
// a time (an application posting from many requests): ioredis sends the
// tasks' adds without waiting for each other's replies.
const c0 = await redisCounters();
t0 = performance.now();
await Promise.all(Array.from({ length: CONCURRENCY }, async (_, t) => {
  for (let i = t; i < N; i += CONCURRENCY) await queue.add('noop', { i });
}));
const enqueueConcurrent = N / ((performance.now() - t0) / 1000);
const c1 = await redisCounters();
log(`enqueue from ${CONCURRENCY} tasks: ${enqueueConcurrent.toFixed(0)}/s`);
await queue.obliterate({ force: true });

// 2. enqueue in bulk, then drain with one worker; Redis counters span both.
const before = await redisCounters();
t0 = performance.now();
for (let i = 0; i < N; i += BULK_CHUNK) {
  const chunk = [];
  for (let j = i; j < Math.min(N, i + BULK_CHUNK); j++) chunk.push({ name: 'noop', data: { i: j } });
  await queue.addBulk(chunk);
}
const enqueueBulk = N / ((performance.now() - t0) / 1000);
log(`enqueue bulk: ${enqueueBulk.toFixed(0)}/s`);

let completed = 0;
let drained;
const drainDone = new Promise((r) => (drained = r));
const pickups = [];
let pickedUp;
const pickupDone = new Promise((r) => (pickedUp = r));
const processor = async (job) => {
  if (job.data.posted === undefined) return;
  pickups.push(nowMs() - job.data.posted);
  if (pickups.length === PICKUP_JOBS) pickedUp();
};

t0 = performance.now();
const worker = new Worker(queueName, processor, {
  connection,
  concurrency: CONCURRENCY,
  removeOnComplete: { count: 1000 },
});
worker.on('completed', () => {
  if (++completed === N) drained();
});
worker.on('failed', (job, err) => log('job failed:', err?.message));
await drainDone;
const drain = N / ((performance.now() - t0) / 1000);
const rssMiB = process.memoryUsage().rss / 2 ** 20;
const pss = pssMiB();
const after = await redisCounters();
log(`drain: ${drain.toFixed(0)}/s`);

// 3. pickup latency: worker idle, jobs posted one at a time.
await sleep(200);
for (let i = 0; i < PICKUP_JOBS; i++) {
  await queue.add('pickup', { posted: nowMs() });
  await sleep(PICKUP_GAP_MS);
}
await Promise.race([pickupDone, sleep(10_000, true)]);
if (pickups.length < PICKUP_JOBS) log(`only ${pickups.length}/${PICKUP_JOBS} pickup jobs ran`);

await worker.close();
await queue.obliterate({ force: true });
await queue.close();
await admin.quit();

const r1 = (x) => Math.round(x * 10) / 10;
console.log(JSON.stringify({
  system: 'bullmq',
  version,
  jobs: N,
  concurrency: CONCURRENCY,
  workers: 1,
  enqueue_one_per_s: r1(enqueueOne),
  enqueue_concurrent_per_s: r1(enqueueConcurrent),
  enqueue_concurrent_redis_us_per_job: r1(((c1.cpuS - c0.cpuS) * 1e6) / N),
  enqueue_bulk_per_s: r1(enqueueBulk),
  drain_per_s: r1(drain),
  pickup_ms: percentiles(pickups),
  redis_cpu_us_per_job: r1(((after.cpuS - before.cpuS) * 1e6) / N),
  commands_per_job: Math.round(((after.commands - before.commands) / N) * 100) / 100,
  worker_mem_mib: r1(rssMiB),
  mem_kind: 'rss',
  worker_pss_mib: pss === null ? null : r1(pss),
}));

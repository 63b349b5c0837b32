// graphile-worker as meson-bench drives it: one process, the same
// concurrency and pool size as meson's worker, a no-op task and a ping task
// that reports when it started (wall clock, microseconds since the epoch).
//
// GRAPHILE_MODE=default: graphile-worker's defaults.
// GRAPHILE_MODE=batched: its documented throughput options (a local queue
// of concurrency + 1 jobs, batched completion and failure).
import { Logger, run } from "graphile-worker";

// Warnings and errors only: graphile-worker logs every job at info, which
// would measure the console rather than the queue.
const logger = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning") {
    process.stderr.write(`${level}: ${message}\n`);
  }
});

const concurrency = Number(process.env.CONCURRENCY ?? 32);
// graphile-worker warns that a pool smaller than its concurrency performs
// poorly; it gets what it asks for.
const poolSize = Number(process.env.POOL_SIZE ?? concurrency);
const batched = process.env.GRAPHILE_MODE === "batched";

const worker = {
  connectionString: process.env.DATABASE_URL,
  concurrentJobs: concurrency,
  maxPoolSize: poolSize,
  pollInterval: 1000,
  logger,
  ...(batched
    ? {
        localQueue: { size: concurrency + 1 },
        completeJobBatchDelay: 0,
        failJobBatchDelay: 0,
      }
    : {}),
};

const taskList = {
  noop: async () => {},
  ping: async (payload) => {
    const nowUs = Math.round((performance.timeOrigin + performance.now()) * 1000);
    process.stdout.write(`ping ${payload.seq} ${nowUs}\n`);
  },
};

const runner = await run({
  preset: { worker },
  concurrency,
  maxPoolSize: poolSize,
  connectionString: process.env.DATABASE_URL,
  taskList,
  noHandleSignals: false,
});
process.stdout.write("ready\n");
await runner.promise;

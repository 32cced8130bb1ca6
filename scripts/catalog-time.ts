// Times standalone mode's embedded catalog (PGlite) under the writes and reads
// of running mirrors, in this process: for each of MIRRORS mirrors, BATCHES
// batches recorded as the pipeline records them (start, finish, two log
// lines), and every 50 batches the reads a status page makes (the last
// batches, the row count, the last log lines). Needs no test service; prints
// figures, asserts nothing.
//
//   node [--liftoff-only] scripts/catalog-time.ts [batches]
//
// Started with --liftoff-only, the WebAssembly of the catalog is compiled the
// way standalone mode compiles it (bin/node-flags.js); without, with V8's
// default tiering (docs/startup.md, Memory). A fresh data directory each run.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { startControlPlane } from '../api-server/src/index.ts';

const batchCount = Number(process.argv[2] ?? 2_000);
const mirrorCount = 4;
const root = mkdtempSync(join(tmpdir(), 'tributary-catalog-time-'));
const controlPlane = await startControlPlane({
  dataDir: join(root, 'data'),
  logger: pino({ level: 'silent' }),
  runEngines: false,
});
const { catalog } = controlPlane;
const mirrors = Array.from({ length: mirrorCount }, (_, index) => `mirror_${index}`);
for (const mirror of mirrors) await catalog.transition(mirror, 'setup');

/** Milliseconds of each tenth of the run, to tell a warm-up from the steady pace. */
const tenths: number[] = [];
let tenthStarted = performance.now();
const started = tenthStarted;
for (let batch = 1; batch <= batchCount; batch++) {
  const batchId = BigInt(batch);
  await Promise.all(
    mirrors.map(async (mirror) => {
      await catalog.startBatch(mirror, { batchId, startTime: new Date(), startLsn: batchId * 1000n });
      await catalog.appendLog(mirror, 'INFO', `batch ${batch} started`);
      await catalog.finishBatch(mirror, {
        batchId,
        endTime: new Date(),
        rowCount: 500n,
        endLsn: batchId * 1000n + 999n,
      });
      await catalog.appendLog(mirror, 'INFO', `batch ${batch} synced: 500 rows`);
      if (batch % 50 === 0) {
        await catalog.listBatches(mirror, { limit: 20, ascending: false, finishedOnly: true });
        await catalog.cdcRowCount(mirror);
        await catalog.listLogs({ mirror, offset: 0, limit: 50 });
      }
    }),
  );
  if (batch % Math.max(1, Math.floor(batchCount / 10)) === 0) {
    const now = performance.now();
    tenths.push(now - tenthStarted);
    tenthStarted = now;
  }
}
const totalMs = performance.now() - started;
await controlPlane.close();
rmSync(root, { recursive: true, force: true });

/** This process's peak resident memory (Linux), MiB. */
const peakMiB = existsSync('/proc/self/status')
  ? Math.round(Number(/^VmHWM:\s+(\d+) kB/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1]) / 1024)
  : undefined;
const lastHalf = tenths.slice(5).reduce((sum, ms) => sum + ms, 0);
const batchesPerSecond = (count: number, ms: number) => ((count * mirrorCount) / ms) * 1000;
console.log(
  `${process.execArgv.join(' ') || '(default flags)'}: ${batchCount} batches x ${mirrorCount} mirrors in ${totalMs.toFixed(0)} ms, ` +
    `${batchesPerSecond(batchCount, totalMs).toFixed(0)} batches/s overall, ` +
    `${batchesPerSecond(batchCount / 2, lastHalf).toFixed(0)} batches/s in the second half; ` +
    `tenths (ms) ${tenths.map((ms) => ms.toFixed(0)).join(' ')}` +
    (peakMiB === undefined ? '' : `; peak RSS ${peakMiB} MiB`),
);

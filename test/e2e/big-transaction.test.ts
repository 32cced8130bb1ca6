// A transaction many batches long, with the engine killed (kill -9) again and
// again while it applies it: every restart goes on from the position inside
// the transaction that the destination's checkpoint holds, so the position
// only moves forward and the mirror finishes; then source and destination are
// equal row by row. docs/engine.md, "Transactions larger than a batch".
//
// The full-size run (2M rows, kill -9 every 20 s) is a manual measurement:
// BIG_TXN_KILL_ROWS=2000000 BIG_TXN_KILL_EVERY_SECONDS=20 BIG_TXN_KILLS=100 \
//   npx vitest run test/e2e/big-transaction.test.ts
// (kills stop once the transaction is through; docs/testing.md has the results).
import { readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { from as copyFrom } from 'pg-copy-streams';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LogEntry } from '../../engine/src/catalog/catalog.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import { exited, startEngine, writeEngineConfig } from '../support/engine-process.ts';
import { createHarness, type Harness } from '../support/mirror-harness.ts';

const rowCount = Number(process.env.BIG_TXN_KILL_ROWS ?? 40_000);
/** Unset: kill as soon as a restart has made progress. Set: kill on this period, as the manual run does. */
const killEverySeconds = process.env.BIG_TXN_KILL_EVERY_SECONDS
  ? Number(process.env.BIG_TXN_KILL_EVERY_SECONDS)
  : undefined;
const kills = Number(process.env.BIG_TXN_KILLS ?? 4);
const manual = killEverySeconds !== undefined;

interface Position {
  readonly batchId: bigint;
  readonly commitLsn: bigint | null;
  readonly changeLsn: bigint | null;
  readonly changeRank: number | null;
}

async function storedPosition(harness: Harness, mirror: string): Promise<Position | undefined> {
  const result = await harness.destination.client.query<{
    batch_id: string;
    txn_commit_lsn: string | null;
    txn_change_lsn: string | null;
    txn_change_rank: number | null;
  }>(
    `SELECT batch_id::text, txn_commit_lsn::text, txn_change_lsn::text, txn_change_rank
     FROM _tributary.checkpoints WHERE mirror = $1`,
    [mirror],
  );
  const row = result.rows[0];
  if (!row) return undefined;
  return {
    batchId: BigInt(row.batch_id),
    commitLsn: row.txn_commit_lsn === null ? null : BigInt(row.txn_commit_lsn),
    changeLsn: row.txn_change_lsn === null ? null : BigInt(row.txn_change_lsn),
    changeRank: row.txn_change_rank,
  };
}

/** VmHWM of a process in KiB (Linux), 0 when unknown. */
function peakRss(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    return Number(/^VmHWM:\s+(\d+) kB/m.exec(status)?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** Whether `later` is a place further into the same transaction than `earlier`. */
function isAfter(later: Position, earlier: Position): boolean {
  if (later.commitLsn === null || later.changeLsn === null || earlier.changeLsn === null) return false;
  if (later.commitLsn !== earlier.commitLsn) return false;
  if (later.changeLsn !== earlier.changeLsn) return later.changeLsn > earlier.changeLsn;
  return (later.changeRank ?? 0) > (earlier.changeRank ?? 0);
}

async function checksum(harness: Harness, side: 'source' | 'destination'): Promise<string> {
  const result = await harness[side].client.query<{ sum: string | null; n: number }>(
    `SELECT md5(string_agg(row_to_json(t)::text, ',' ORDER BY id)) AS sum, count(*)::int AS n FROM big t`,
  );
  return `${result.rows[0]?.n}:${result.rows[0]?.sum}`;
}

/**
 * For the manual run: where each restart's time went, from the catalog's log
 * and batch times. start: process start to streaming (set-up); decode: to the
 * transaction's first change (the walsender decoding it again); skip: to the
 * first batch of new changes (reading past what the destination holds).
 */
async function reportRestartCosts(
  harness: Harness,
  mirror: string,
  restarts: readonly number[],
  logs: readonly LogEntry[],
): Promise<void> {
  const { batches } = await harness.catalog.listBatches(mirror, {
    limit: 0,
    ascending: true,
    finishedOnly: true,
  });
  const ordered = [...logs].sort((a, b) => a.timestampMs - b.timestampMs);
  for (const restartedAt of restarts) {
    const streaming = ordered.find(
      (entry) => entry.timestampMs >= restartedAt && entry.message.startsWith('streaming changes'),
    );
    const resumed = ordered.find(
      (entry) => entry.timestampMs >= restartedAt && entry.message.startsWith('resuming the transaction'),
    );
    const firstBatch = batches.find(
      (batch) => batch.startTime.getTime() >= (resumed?.timestampMs ?? restartedAt),
    );
    const seconds = (from: number | undefined, to: number | undefined) =>
      from === undefined || to === undefined ? '?' : ((to - from) / 1000).toFixed(1);
    console.info(
      `restart at ${new Date(restartedAt).toISOString()}: start ${seconds(restartedAt, streaming?.timestampMs)} s, decode ${seconds(streaming?.timestampMs, resumed?.timestampMs)} s, skip ${seconds(resumed?.timestampMs, firstBatch?.startTime.getTime())} s`,
    );
  }
}

describe('a transaction larger than many batches under repeated kill -9', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness('bigtxn');
  });

  afterAll(async () => {
    await harness?.close();
  });

  it(`keeps its progress through ${kills} kills inside a ${rowCount}-row transaction, then matches the source`, {
    timeout: manual ? 3_600_000 : 120_000,
  }, async () => {
    const { source } = harness;
    await source.client.query(
      `CREATE TABLE big (id bigint PRIMARY KEY, account int NOT NULL, amount numeric(12,2), note text)`,
    );
    await source.client.query(`INSERT INTO big SELECT g, g % 10, 0, 'before' FROM generate_series(1, 100) g`);
    const mirror = `bigtxn-${randomSuffix()}`;
    const configPath = writeEngineConfig(harness, {
      name: mirror,
      sourcePeer: 'source',
      destinationPeer: 'destination',
      tableMappings: [
        { source: { schema: 'public', table: 'big' }, destination: { schema: 'public', table: 'big' } },
      ],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
      // The manual run keeps the defaults: batches cut at the 64 MiB memory budget.
      ...(manual ? {} : { maxBatchSize: 500 }),
    });

    let engine = startEngine(mirror, configPath);
    try {
      await waitFor(
        async () => (await harness.catalog.getRuntime(mirror))?.phase === 'running',
        60_000,
        'the mirror to stream',
      );
      // One transaction: inserts, updates of rows it inserted and of older
      // ones, deletes, and a COPY whose rows share WAL records.
      await source.client.query('BEGIN');
      await source.client.query(
        `INSERT INTO big SELECT g, g % 1000, g * 0.01, 'note ' || md5(g::text) FROM generate_series(101, ${rowCount}) g`,
      );
      await source.client.query(`UPDATE big SET amount = amount + 1, note = 'updated' WHERE id % 97 = 0`);
      await source.client.query(`DELETE FROM big WHERE id % 89 = 0`);
      const copied = Array.from({ length: 2000 }, (_, index) => `${rowCount + 1 + index}\t1\t2.50\tcopied\n`);
      await pipeline(
        Readable.from([copied.join('')]),
        source.client.query(copyFrom('COPY big (id, account, amount, note) FROM STDIN')),
      );
      await source.client.query('COMMIT');
      const started = Date.now();

      const seen: Position[] = [];
      const wentBack: Position[] = [];
      const restarts: number[] = [];
      /** The engine process's peak resident memory before each kill (manual run). */
      const peakRssKiB: number[] = [];
      /** Kills after which the checkpoint had not moved since the previous kill. */
      const stalled: number[] = [];
      for (let kill = 0; kill < kills; kill++) {
        const previous = seen.at(-1);
        if (killEverySeconds !== undefined) {
          await new Promise((resolve) => setTimeout(resolve, killEverySeconds * 1000));
        } else {
          // Kill as soon as this run has made a step of its own inside the transaction.
          await waitFor(
            async () => {
              const position = await storedPosition(harness, mirror);
              if (
                position &&
                previous &&
                !isAfter(position, previous) &&
                position.batchId > previous.batchId
              ) {
                // A batch of this run stored a place at or before the last one:
                // the transaction was replayed from its start.
                wentBack.push(position);
              }
              // Through the transaction's end (commitLsn null) ends the kills too.
              if (!position) return false;
              return position.commitLsn === null || !previous || isAfter(position, previous);
            },
            60_000,
            `progress inside the transaction after restart ${kill}`,
          );
        }
        if (manual) peakRssKiB.push(peakRss(engine.pid));
        engine.kill('SIGKILL');
        await exited(engine);
        const position = await storedPosition(harness, mirror);
        restarts.push(Date.now());
        engine = startEngine(mirror, configPath);
        // No checkpoint yet (a period shorter than the start-up) or past the
        // transaction's end: both are allowed only in a manual run.
        if (!position || position.commitLsn === null) {
          console.info(`kill ${kill + 1}: ${position ? 'the transaction is through' : 'no checkpoint yet'}`);
          if (position) break;
          continue;
        }
        if (previous && !isAfter(position, previous)) stalled.push(kill + 1);
        seen.push(position);
        console.info(
          `kill ${kill + 1} after ${((Date.now() - started) / 1000).toFixed(1)} s: batch ${position.batchId}, change ${position.changeLsn}#${position.changeRank}`,
        );
      }
      if (!manual) expect(seen.length).toBe(kills);
      if (stalled.length > 0) console.info(`no progress between kills: before kill ${stalled.join(', ')}`);
      await waitFor(
        async () => (await checksum(harness, 'source')) === (await checksum(harness, 'destination')),
        manual ? 3_600_000 : 60_000,
        'the destination to match the source',
      );
      console.info(
        `the transaction is at the destination ${((Date.now() - started) / 1000).toFixed(1)} s after its commit`,
      );
      expect(await checksum(harness, 'destination')).toBe(await checksum(harness, 'source'));
      const finished = await storedPosition(harness, mirror);
      expect(finished?.commitLsn).toBeNull();
      // Each restart said where it went on from.
      const logs = await harness.catalog.listLogs({ mirror, levels: ['INFO'], offset: 0, limit: 1000 });
      const resumed = logs.entries.filter((entry) => entry.message.startsWith('resuming the transaction'));
      expect(resumed.length).toBeGreaterThanOrEqual(seen.length);
      if (manual) {
        await reportRestartCosts(harness, mirror, restarts, logs.entries);
        console.info(
          `engine peak RSS before each kill: ${peakRssKiB.map((kib) => `${Math.round(kib / 1024)} MiB`).join(', ')}`,
        );
      }
      // Every restart moved the checkpoint forward inside the transaction, and
      // none wrote a place it had passed.
      expect(stalled).toEqual([]);
      expect(wentBack).toEqual([]);
    } finally {
      engine.kill('SIGTERM');
      await exited(engine);
    }
  });
});

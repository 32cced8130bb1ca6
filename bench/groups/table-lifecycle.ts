// The other tables while a table is added to a running mirror and while it is
// resynced online (issue 39), through the running service: `tributary
// standalone` started as `make start` starts it (bin/tributary.js), driven over
// /api/v1 alone. A mirror streams BENCH_RATE rows/s, spread over three tables,
// into the destination; the group times when each of those rows becomes
// visible there
//
//   baseline  with nothing else going on, for BENCH_LATENCY_SECONDS;
//   add       while a table of BENCH_LIFECYCLE_ROWS rows is added by an edit of
//             the mirror's table mappings (the interface edits a paused
//             mirror: pause, then STATUS_RUNNING with `additional_tables`);
//   resync    while that table is resynced online (/api/v1/mirrors/tables/resync),
//             a reader polling its count(*) at the destination every 20 ms;
//   resync_unread  while it is resynced again, no reader: the resync's own cost
//             to the other tables, apart from the reader's queries;
//   after     nothing else going on again, for as long as the baseline: the
//             machine is shared, and a drift of its load shows here.
//
// The added table takes 50 inserts and 50 updates a second throughout (also
// before it is added), so its load and its resync run under changes. A row's
// latency is from its `created` (clock_timestamp() at the insert, just before
// the commit) to when it is visible: at PostgreSQL, the start of the first
// poll of the table's highest key that sees it (every 20 ms); elsewhere the
// destination's own stamp (lifecycle-targets.ts `visibleBy`). Every table is
// compared with the source row by row at the end.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { TestDatabase } from '../../test/support/databases.ts';
import { type StandaloneProcess, startStandalone } from '../../test/support/standalone-process.ts';
import { benchConfig, type LifecycleDestination, PartialGroupFailure } from '../lib/config.ts';
import { percentiles } from '../lib/latency.ts';
import {
  type LifecycleTarget,
  lifecycleTarget,
  sourceRows,
  type TableCounter,
} from '../lib/lifecycle-targets.ts';
import { loadAverage, machineCpuTicks } from '../lib/machine.ts';
import { processCpuSeconds, ServerCpu } from '../lib/server-cpu.ts';
import { sourceDatabase, uniqueName } from '../lib/servers.ts';
import { until } from '../lib/stats.ts';
import { insertRows, tableColumns } from '../lib/workload.ts';

const latencyTables = ['lat_1', 'lat_2', 'lat_3'] as const;
const addedTable = 'big';
const ticksPerSecond = 10;
const pollIntervalMs = 20;
const statusIntervalMs = 100;
const warmUpMs = 5_000;
const settleMs = 5_000;
/** Inserts, and as many updates, of the added table a tick. */
const addedTableChangesPerTick = 5;
const compareChunkRows = 50_000;
const password = 'bench-table-lifecycle-password';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

/** Work done `perSecond` times a second from now on, on schedule (at once when late) until stopped. */
interface Ticks {
  readonly maxLateMs: number;
  /** Throws the work's error, if it failed. */
  check(): void;
  stop(): Promise<void>;
}

function startTicks(perSecond: number, work: (tick: number) => Promise<void>): Ticks {
  let running = true;
  let maxLateMs = 0;
  let failed: unknown;
  const started = Date.now();
  const done = (async () => {
    for (let tick = 0; running; tick++) {
      const wait = started + (tick * 1000) / perSecond - Date.now();
      if (wait > 0) await sleep(wait);
      else maxLateMs = Math.max(maxLateMs, -wait);
      if (running) await work(tick);
    }
  })().catch((error: unknown) => {
    failed = error;
  });
  return {
    get maxLateMs() {
      return Math.round(maxLateMs);
    },
    check() {
      if (failed) throw failed;
    },
    async stop() {
      running = false;
      await done;
      if (failed) throw failed;
    },
  };
}

/** The rows of `table` (0, 1, 2) due at `tick`: BENCH_RATE a second over the three, exactly on average. */
function rowsDue(tick: number, table: number): number {
  const perTable = benchConfig.latencyRate / ticksPerSecond / latencyTables.length;
  const upTo = (count: number) => Math.floor(count * perTable + (table * perTable) / latencyTables.length);
  return upTo(tick + 1) - upTo(tick);
}

interface Poll {
  readonly atMs: number;
  readonly maxIds: readonly number[];
}

/** What a status read says of the mirror and of the added table. */
interface Status {
  readonly mirror: string;
  readonly table: string | undefined;
  readonly error: string | undefined;
}

async function status(service: StandaloneProcess, mirror: string): Promise<Status> {
  const { body } = await service.call('POST', '/api/v1/mirrors/status', { flowJobName: mirror });
  const answer = body as {
    currentFlowState?: string;
    errorMessage?: string;
    tables?: { sourceTableIdentifier: string; state: string; error?: { message?: string } }[];
  };
  const table = answer.tables?.find((entry) => entry.sourceTableIdentifier === `public.${addedTable}`);
  return {
    mirror: answer.currentFlowState ?? 'unknown',
    table: table?.state,
    error: table?.error?.message ?? (answer.errorMessage || undefined),
  };
}

async function call(service: StandaloneProcess, path: string, body: unknown): Promise<void> {
  const answer = await service.call('POST', path, body);
  if (answer.status !== 200) throw new Error(`${path}: ${answer.status} ${JSON.stringify(answer.body)}`);
}

/**
 * Polls the mirror's status until `done` says so; returns when each state of
 * the mirror and of the added table was first seen (ms). A failed mirror or
 * an errored added table ends the run.
 */
async function watchStatus(
  service: StandaloneProcess,
  mirror: string,
  done: (current: Status, firstSeen: ReadonlyMap<string, number>) => boolean,
  timeoutMs: number,
  check: () => void,
): Promise<Map<string, number>> {
  const firstSeen = new Map<string, number>();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    check();
    const at = Date.now();
    const seen = await status(service, mirror);
    for (const state of [seen.mirror, seen.table])
      if (state && !firstSeen.has(state)) firstSeen.set(state, at);
    if (seen.mirror === 'STATUS_FAILED' || seen.table === 'TABLE_STATE_ERRORED')
      throw new Error(`${mirror}: ${seen.mirror}, ${addedTable} ${seen.table}: ${seen.error}`);
    if (done(seen, firstSeen)) return firstSeen;
    if (Date.now() > deadline)
      throw new Error(`${mirror}: not done within ${timeoutMs / 1000} s (seen ${[...firstSeen.keys()]})`);
    await sleep(statusIntervalMs);
  }
}

/** A scrape of the service's /metrics: the batches the mirror synced so far and the seconds their writes took. */
async function batchMetrics(service: StandaloneProcess, mirror: string) {
  const text = await (await fetch(`${service.baseUrl}/metrics`)).text();
  const value = (name: string) =>
    Number(new RegExp(`^${name}\\{mirror="${mirror}"\\} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
  return {
    batches: value('tributary_engine_batch_sync_seconds_count'),
    syncSeconds: value('tributary_engine_batch_sync_seconds_sum'),
    rows: value('tributary_engine_cdc_rows_total'),
  };
}

/** What is read at each window's edges: CPU used so far by whom, and the service's batch counters. */
interface Reading {
  readonly atMs: number;
  readonly standaloneCpu: number;
  readonly sourceCpu: number;
  readonly targetCpu: number | undefined;
  readonly machine: { readonly busy: number; readonly total: number };
  readonly metrics: Awaited<ReturnType<typeof batchMetrics>>;
}

interface Window {
  readonly fromMs: number;
  readonly toMs: number;
  readonly start: Reading;
  readonly end: Reading;
}

const rounded = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits;

/** One run of the group into one destination. */
async function lifecycleRun(kind: LifecycleDestination): Promise<Record<string, unknown>> {
  const addedRows = benchConfig.lifecycleRows;
  const loadAtStart = loadAverage();
  const source = await sourceDatabase('bench_tl_src');
  const tables = [...latencyTables, addedTable];
  let target: LifecycleTarget | undefined;
  let service: StandaloneProcess | undefined;
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-table-lifecycle-'));
  const clients: pg.Client[] = [];
  let connectionLost: unknown;
  const connect = async (database: TestDatabase) => {
    const client = new pg.Client(database.config);
    // A connection ended from outside fails the run at its next check, not the process.
    client.on('error', (error) => {
      connectionLost ??= error;
    });
    await client.connect();
    clients.push(client);
    return client;
  };
  try {
    for (const table of tables) await source.client.query(`CREATE TABLE ${table} (${tableColumns})`);
    console.log(`  ${kind}: writing ${addedRows} rows into ${addedTable}`);
    await insertRows(source.client, addedTable, addedRows);
    await source.client.query('ANALYZE');
    target = await lifecycleTarget(kind, tables);
    const sourceCpu = await ServerCpu.of(source.client);
    const targetCpu = await target.serverCpu();

    service = await startStandalone(dataDir, password, { throughLauncher: true });
    const pid = service.child.pid as number;
    const suffix = uniqueName('tl').replace(/_/g, '-');
    const mirror = `bench-lifecycle-${suffix}`;
    const mapping = (table: string) => ({
      source_table_identifier: `public.${table}`,
      destination_table_identifier: target?.destinationIdentifier(table),
    });
    const { host, port, user, password: secret, database } = source.config;
    await call(service, '/api/v1/peers/create', {
      peer: {
        name: `src-${suffix}`,
        type: 3,
        relational_config: { host, port, user, password: secret, database },
      },
    });
    await call(service, '/api/v1/peers/create', { peer: target.peer(`dst-${suffix}`) });
    await call(service, '/api/v1/flows/cdc/create', {
      connection_configs: {
        flow_job_name: mirror,
        source_name: `src-${suffix}`,
        destination_name: `dst-${suffix}`,
        table_mappings: latencyTables.map(mapping),
        do_initial_snapshot: true,
        idle_timeout_seconds: 1,
        streaming: true,
        ...target.mirrorOptions,
      },
    });
    await watchStatus(
      service,
      mirror,
      (current) => current.mirror === 'STATUS_RUNNING',
      120_000,
      () => {},
    );

    const reading = async (): Promise<Reading> => ({
      atMs: Date.now(),
      standaloneCpu: processCpuSeconds(pid),
      sourceCpu: sourceCpu.seconds(),
      targetCpu: targetCpu?.seconds(),
      machine: machineCpuTicks(),
      metrics: await batchMetrics(service as StandaloneProcess, mirror),
    });

    // The writers, and the poll of what is visible.
    const latencyWriter = await connect(source);
    const written = latencyTables.map(() => 0);
    const writingFrom = Date.now();
    let writingTo = Number.NaN;
    const steady = startTicks(ticksPerSecond, async (tick) => {
      for (const [index, table] of latencyTables.entries()) {
        const rowCount = rowsDue(tick, index);
        if (rowCount === 0) continue;
        await insertRows(latencyWriter, table, rowCount, (written[index] ?? 0) + 1);
        written[index] = (written[index] ?? 0) + rowCount;
      }
    });
    const addedWriter = await connect(source);
    let addedInserted = 0;
    const addedChanges = startTicks(ticksPerSecond, async (tick) => {
      const updated = Array.from(
        { length: addedTableChangesPerTick },
        (_, change) => 1 + (((tick * addedTableChangesPerTick + change) * 7919) % addedRows),
      );
      await addedWriter.query('BEGIN');
      await insertRows(addedWriter, addedTable, addedTableChangesPerTick, addedRows + addedInserted + 1);
      await addedWriter.query(
        `UPDATE ${addedTable} SET amount = amount + 1, note = 'changed ' || id WHERE id = ANY($1::bigint[])`,
        [updated],
      );
      await addedWriter.query('COMMIT');
      addedInserted += addedTableChangesPerTick;
    });
    const polls: Poll[] = [];
    let polling = true;
    let pollFailed: unknown;
    const { maxIds } = target;
    const poller = (async () => {
      if (!maxIds) return;
      while (polling) {
        const atMs = Date.now();
        polls.push({ atMs, maxIds: await maxIds([...latencyTables]) });
        await sleep(atMs + pollIntervalMs - Date.now());
      }
    })().catch((error: unknown) => {
      pollFailed = error;
    });
    const check = () => {
      if (connectionLost) throw connectionLost;
      steady.check();
      addedChanges.check();
      if (pollFailed) throw pollFailed;
    };
    const windowOf = async (work: () => Promise<void>): Promise<Window> => {
      const start = await reading();
      await work();
      const end = await reading();
      return { fromMs: start.atMs, toMs: end.atMs, start, end };
    };
    // Reads the status as often as an add or a resync is watched, so every window bears the same reads.
    const hold = async (ms: number) => {
      const startedAt = Date.now();
      await watchStatus(
        service as StandaloneProcess,
        mirror,
        () => Date.now() >= startedAt + ms,
        ms + 60_000,
        check,
      );
    };

    await hold(warmUpMs);
    console.log(`  ${kind}: baseline (${benchConfig.latencySeconds} s, ${benchConfig.latencyRate} rows/s)`);
    const baseline = await windowOf(() => hold(benchConfig.latencySeconds * 1000));

    console.log(`  ${kind}: adding ${addedTable} (${addedRows} rows) by an edit of the paused mirror`);
    let add: Record<string, number> = {};
    const addWindow = await windowOf(async () => {
      const pauseAt = Date.now();
      await call(service as StandaloneProcess, '/api/v1/mirrors/state_change', {
        flowJobName: mirror,
        requestedFlowState: 'STATUS_PAUSED',
      });
      const paused = await watchStatus(
        service as StandaloneProcess,
        mirror,
        (current) => current.mirror === 'STATUS_PAUSED',
        120_000,
        check,
      );
      const editAt = Date.now();
      await call(service as StandaloneProcess, '/api/v1/mirrors/state_change', {
        flowJobName: mirror,
        requestedFlowState: 'STATUS_RUNNING',
        flowConfigUpdate: { cdcFlowConfigUpdate: { additional_tables: [mapping(addedTable)] } },
      });
      const seen = await watchStatus(
        service as StandaloneProcess,
        mirror,
        (current) => current.mirror === 'STATUS_RUNNING' && current.table === 'TABLE_STATE_STREAMING',
        60 * 60_000,
        check,
      );
      add = {
        pauseAt,
        pausedAt: paused.get('STATUS_PAUSED') ?? Number.NaN,
        editAt,
        runningAt: seen.get('STATUS_RUNNING') ?? Number.NaN,
        // A load shorter than a status read may never be seen `loading`.
        loadingAt: seen.get('TABLE_STATE_LOADING') ?? seen.get('TABLE_STATE_STREAMING') ?? Number.NaN,
        loadedAt: seen.get('TABLE_STATE_STREAMING') ?? Number.NaN,
      };
    });
    await hold(settleMs);

    // One resync of the added table, watched by `counter` polling its count(*) when given.
    const resyncOnce = async (counter: TableCounter | undefined) => {
      const counts = { before: Number.NaN, min: Number.POSITIVE_INFINITY, max: 0, samples: 0, unreadable: 0 };
      let readingMs = 0;
      let times: Record<string, number> = {};
      const window = await windowOf(async () => {
        let reading = true;
        const reader = (async () => {
          if (!counter) return;
          counts.before = await counter.count(addedTable);
          while (reading) {
            const atMs = Date.now();
            try {
              const count = await counter.count(addedTable);
              counts.min = Math.min(counts.min, count);
              counts.max = Math.max(counts.max, count);
              counts.samples++;
            } catch {
              // The instant a destination swaps without a table (docs/clickhouse.md's RENAME fallback).
              counts.unreadable++;
            }
            readingMs += Date.now() - atMs;
            await sleep(atMs + pollIntervalMs - Date.now());
          }
        })();
        try {
          // The count before the request, then the request.
          while (counter && Number.isNaN(counts.before)) await sleep(5);
          const requestAt = Date.now();
          await call(service as StandaloneProcess, '/api/v1/mirrors/tables/resync', {
            flowJobName: mirror,
            sourceTableIdentifier: `public.${addedTable}`,
          });
          let resyncingSeen = false;
          const seen = await watchStatus(
            service as StandaloneProcess,
            mirror,
            (current) => {
              resyncingSeen ||= current.table === 'TABLE_STATE_RESYNCING';
              return resyncingSeen && current.table === 'TABLE_STATE_STREAMING';
            },
            60 * 60_000,
            check,
          );
          times = {
            requestAt,
            resyncingAt: seen.get('TABLE_STATE_RESYNCING') ?? Number.NaN,
            doneAt: Date.now(),
          };
        } finally {
          reading = false;
          await reader;
          await counter?.close();
        }
      });
      const readings = counts.samples + counts.unreadable;
      return {
        window,
        times,
        reader: counter
          ? {
              readerCountBefore: counts.before,
              readerCountMin: counts.min,
              readerCountMax: counts.max,
              readerSamples: counts.samples,
              readerUnreadable: counts.unreadable,
              readerMeanQueryMs: readings > 0 ? rounded(readingMs / readings, 1) : undefined,
              readerNeverSawFewer: counts.min >= counts.before,
            }
          : undefined,
      };
    };
    console.log(`  ${kind}: resyncing ${addedTable} online, a reader polling its count(*)`);
    const readResync = await resyncOnce(await target.countReader?.());
    await hold(settleMs);
    // Again without the reader: what the resync alone costs the other tables, the reader's queries apart.
    console.log(`  ${kind}: resyncing ${addedTable} online again, no reader`);
    const unreadResync = await resyncOnce(undefined);
    await hold(settleMs);
    console.log(`  ${kind}: after (${benchConfig.latencySeconds} s)`);
    const after = await windowOf(() => hold(benchConfig.latencySeconds * 1000));
    await addedChanges.stop();
    await hold(1000);
    await steady.stop();
    writingTo = Date.now();

    // Everything written is at the destination before the poll stops.
    await until(
      `${kind}: the latency tables caught up`,
      async () => {
        if (pollFailed) throw pollFailed;
        if (maxIds) {
          const last = polls.at(-1)?.maxIds ?? [];
          return written.every((count, index) => (last[index] ?? 0) >= count);
        }
        for (const [index, table] of latencyTables.entries()) {
          if ((await (target as LifecycleTarget).arrived(table)) < (written[index] ?? 0)) return false;
        }
        return true;
      },
      10 * 60_000,
      200,
    );
    polling = false;
    await poller;
    const finalBatches = await batchesOf(service, mirror);

    console.log(`  ${kind}: comparing every table with the source row by row`);
    const compared = await compareTables(source, target, tables);
    const latencies = await rowLatencies(source, target, polls, written);

    const addLoadFrom = Math.max(
      add.loadingAt ?? Number.NaN,
      catchUp(latencies, add.runningAt ?? Number.NaN),
    );
    const windows = {
      baseline: summary(latencies, baseline, finalBatches),
      add: summary(latencies, addWindow, finalBatches),
      add_pause: summary(latencies, { ...addWindow, toMs: addLoadFrom }, finalBatches, false),
      add_load: summary(latencies, { ...addWindow, fromMs: addLoadFrom }, finalBatches, false),
      resync: summary(latencies, readResync.window, finalBatches),
      resync_unread: summary(latencies, unreadResync.window, finalBatches),
      after: summary(latencies, after, finalBatches),
    };
    const p99 = (name: keyof typeof windows) => windows[name].latencyMs.p99;
    const comparedWindows = ['add', 'add_load', 'resync', 'resync_unread', 'after'] as const;
    const ratio = (name: keyof typeof windows) => rounded(p99(name) / p99('baseline'));
    const seconds = (from: number | undefined, to: number | undefined) =>
      rounded(((to ?? Number.NaN) - (from ?? Number.NaN)) / 1000);
    const loadSeconds = seconds(add.editAt, add.loadedAt);
    const resyncFigures = (run: typeof readResync) => {
      const resyncSeconds = seconds(run.times.requestAt, run.times.doneAt);
      return {
        seconds: resyncSeconds,
        rowsPerSecond: Math.round(addedRows / resyncSeconds),
        requestToResyncingSeconds: seconds(run.times.requestAt, run.times.resyncingAt),
      };
    };
    const totalWritten = written.reduce((sum, count) => sum + count, 0);
    const writingSeconds = (writingTo - writingFrom) / 1000;
    return {
      destination: target.description,
      settings: {
        rowsPerSecond: benchConfig.latencyRate,
        latencyTables: latencyTables.length,
        addedTableRows: addedRows,
        addedTableChangesPerSecond: {
          inserts: addedTableChangesPerTick * ticksPerSecond,
          updates: addedTableChangesPerTick * ticksPerSecond,
        },
        windowSeconds: benchConfig.latencySeconds,
        visibleBy: target.visibleBy,
        mirror: { idle_timeout_seconds: 1, streaming: true, ...target.mirrorOptions },
        service: 'tributary standalone through bin/tributary.js (as make start), one process, PGlite catalog',
      },
      windows,
      p99VsBaseline: Object.fromEntries(comparedWindows.map((name) => [name, ratio(name)])),
      p99OverBaselineMs: Object.fromEntries(
        comparedWindows.map((name) => [name, p99(name) - p99('baseline')]),
      ),
      add: {
        pauseRequestToPausedSeconds: seconds(add.pauseAt, add.pausedAt),
        editToRunningSeconds: seconds(add.editAt, add.runningAt),
        runningToCaughtUpSeconds: seconds(add.runningAt, addLoadFrom),
        editToLoadedSeconds: loadSeconds,
        loadedRowsPerSecond: Math.round(addedRows / loadSeconds),
      },
      resync: {
        ...resyncFigures(readResync),
        ...(readResync.reader ?? {
          reader: 'none: a topic has no count(*); its rows come again as snapshot messages',
        }),
      },
      resync_unread: resyncFigures(unreadResync),
      writer: {
        rowsWritten: totalWritten,
        rowsPerSecond: Math.round(totalWritten / writingSeconds),
        maxLateMs: steady.maxLateMs,
        addedTableMaxLateMs: addedChanges.maxLateMs,
        addedTableRowsInserted: addedInserted,
      },
      check: compared,
      loadAverage: { atStart: loadAtStart, atEnd: loadAverage() },
    };
  } finally {
    await service?.stop();
    for (const client of clients) await client.end().catch(() => {});
    rmSync(dataDir, { recursive: true, force: true });
    await target?.close();
    await source.drop();
  }
}

interface Batch {
  readonly startMs: number;
  readonly endMs: number;
  readonly rowCount: number;
}

/** Every batch of the mirror, through /api/v1/mirrors/cdc/batches. */
async function batchesOf(service: StandaloneProcess, mirror: string): Promise<Batch[]> {
  const { body } = await service.call('POST', '/api/v1/mirrors/cdc/batches', {
    flowJobName: mirror,
    limit: 0,
  });
  const listed = (body as { cdcBatches: { startTime: string; endTime: string | null; numRows: string }[] })
    .cdcBatches;
  return listed
    .filter((batch) => batch.endTime !== null)
    .map((batch) => ({
      startMs: Date.parse(batch.startTime),
      endMs: Date.parse(batch.endTime as string),
      rowCount: Number(batch.numRows),
    }));
}

/** Every row of the latency tables: its commit time, when it was visible, and the destination's own stamp. */
interface RowTimes {
  readonly createdMs: Float64Array;
  readonly visibleMs: Float64Array;
  /** The synced-at column (PostgreSQL: its writing transaction's start); NaN where the stamp is the visible time. */
  readonly stampMs: Float64Array;
}

async function rowLatencies(
  source: TestDatabase,
  target: LifecycleTarget,
  polls: readonly Poll[],
  written: readonly number[],
): Promise<RowTimes> {
  const total = written.reduce((sum, count) => sum + count, 0);
  const times = {
    createdMs: new Float64Array(total),
    visibleMs: new Float64Array(total),
    stampMs: new Float64Array(total).fill(Number.NaN),
  };
  let at = 0;
  for (const [index, table] of latencyTables.entries()) {
    const rowCount = written[index] ?? 0;
    const created = await source.client.query<{ id: number; ms: number }>(
      `SELECT id::int AS id, extract(epoch FROM created)::float8 * 1000 AS ms FROM ${table} ORDER BY id`,
    );
    if (created.rows.length !== rowCount)
      throw new Error(`${table}: ${created.rows.length} rows, ${rowCount} written`);
    const stamps = await target.stamps(table, rowCount);
    let poll = 0;
    for (const row of created.rows) {
      times.createdMs[at] = row.ms;
      const stamp = stamps[row.id] ?? Number.NaN;
      if (target.maxIds) {
        // Rows of a table are committed in key order and applied in commit order.
        while (poll < polls.length && (polls[poll]?.maxIds[index] ?? 0) < row.id) poll++;
        const visible = polls[poll]?.atMs;
        if (visible === undefined) throw new Error(`${table}: row ${row.id} never seen at the destination`);
        times.visibleMs[at] = visible;
        times.stampMs[at] = stamp;
      } else {
        if (Number.isNaN(stamp)) throw new Error(`${table}: row ${row.id} has no message`);
        times.visibleMs[at] = stamp;
      }
      at++;
    }
  }
  return times;
}

/**
 * When the rows committed before `runningAt` (the stream open again after
 * the edit) were all visible: the backlog of the pause applied. NaN when
 * there was none.
 */
function catchUp(times: RowTimes, runningAt: number): number {
  let last = Number.NaN;
  for (let row = 0; row < times.createdMs.length; row++) {
    if ((times.createdMs[row] ?? 0) < runningAt)
      last = Math.max(Number.isNaN(last) ? 0 : last, times.visibleMs[row] ?? 0);
  }
  return last;
}

/** The latency figures of the rows committed in `window`, and what the service and the servers did meanwhile. */
function summary(times: RowTimes, window: Window, batches: readonly Batch[], withReadings = true) {
  const latencies: number[] = [];
  const tenths: number[][] = Array.from({ length: 10 }, () => []);
  const untilWriteStart: number[] = [];
  const writeToVisible: number[] = [];
  for (let row = 0; row < times.createdMs.length; row++) {
    const created = times.createdMs[row] ?? 0;
    if (created < window.fromMs || created >= window.toMs) continue;
    const visible = times.visibleMs[row] ?? 0;
    const stamp = times.stampMs[row] ?? Number.NaN;
    latencies.push(visible - created);
    const tenth = Math.min(9, Math.floor(((created - window.fromMs) / (window.toMs - window.fromMs)) * 10));
    tenths[tenth]?.push(visible - created);
    if (!Number.isNaN(stamp)) {
      untilWriteStart.push(stamp - created);
      writeToVisible.push(visible - stamp);
    }
  }
  const inWindow = batches.filter((batch) => batch.startMs >= window.fromMs && batch.startMs < window.toMs);
  const wallSeconds = (window.toMs - window.fromMs) / 1000;
  const { start, end } = window;
  const cores = (from: number | undefined, to: number | undefined) =>
    from === undefined || to === undefined ? undefined : rounded((to - from) / wallSeconds);
  const syncedBatches = end.metrics.batches - start.metrics.batches;
  return {
    seconds: rounded(wallSeconds, 1),
    rows: latencies.length,
    latencyMs: percentiles(latencies),
    // How the latency moved through the window: the p99 of each tenth of it by commit time.
    p99ByTenthMs: tenths.map((slice) => percentiles(slice).p99),
    ...(untilWriteStart.length > 0
      ? {
          // Where the time goes: until the destination's write transaction began (its synced-at stamp), then to visible.
          untilWriteStartMs: percentiles(untilWriteStart),
          writeStartToVisibleMs: percentiles(writeToVisible),
        }
      : {}),
    batches: {
      count: inWindow.length,
      rowsPerBatch: percentiles(inWindow.map((batch) => batch.rowCount)),
      startToDurableMs: percentiles(inWindow.map((batch) => batch.endMs - batch.startMs)),
    },
    ...(withReadings
      ? {
          meanBatchWriteMs:
            syncedBatches > 0
              ? rounded(((end.metrics.syncSeconds - start.metrics.syncSeconds) / syncedBatches) * 1000, 1)
              : undefined,
          cpuCores: {
            standalone: cores(start.standaloneCpu, end.standaloneCpu),
            sourceServer: cores(start.sourceCpu, end.sourceCpu),
            targetServer: cores(start.targetCpu, end.targetCpu),
            machineBusyFraction: rounded(
              (end.machine.busy - start.machine.busy) / (end.machine.total - start.machine.total),
            ),
          },
        }
      : {}),
  };
}

/** Compares `table` at the destination with the source's, key range by key range; the differences found (at most five). */
async function differences(source: TestDatabase, target: LifecycleTarget, table: string) {
  const found: { id: string; source: string | null; destination: string | null }[] = [];
  let rowCount = 0;
  let after = 0n;
  for (;;) {
    const expected = await sourceRows(source.client, table, after, undefined, compareChunkRows);
    const last = expected.length === compareChunkRows ? expected.at(-1)?.id : undefined;
    const actual = await target.rows(table, after, last);
    const actualById = new Map(actual.map((row) => [row.id, row.text]));
    for (const row of expected) {
      const text = actualById.get(row.id);
      if (text !== row.text && found.length < 5)
        found.push({ id: String(row.id), source: row.text, destination: text ?? null });
      actualById.delete(row.id);
    }
    for (const [id, text] of actualById) {
      if (found.length < 5) found.push({ id: String(id), source: null, destination: text });
    }
    rowCount += expected.length;
    if (last === undefined) return { rowCount, found, extra: actualById.size };
    after = last;
  }
}

/** Every table equal to the source row by row, or the run fails naming rows that differ. */
async function compareTables(source: TestDatabase, target: LifecycleTarget, tables: readonly string[]) {
  const rowCounts: Record<string, number> = {};
  for (const table of tables) {
    // A destination without transactions (ClickHouse, Kafka) may still be writing the last batch's other tables.
    for (let attempt = 1; ; attempt++) {
      const { rowCount, found } = await differences(source, target, table);
      if (found.length === 0) {
        rowCounts[table] = rowCount;
        break;
      }
      if (attempt === 3)
        throw new Error(
          `${target.kind}: ${table} differs from the source (${rowCount} source rows); rows that differ: ${JSON.stringify(found)}`,
        );
      await sleep(5_000);
    }
  }
  return { equalRowByRow: true, rows: rowCounts };
}

export async function runTableLifecycleGroup(): Promise<Record<string, unknown>> {
  const results: Record<string, unknown> = {};
  const failures: string[] = [];
  for (const kind of benchConfig.lifecycleDestinations) {
    console.log(`table-lifecycle into ${kind} (${loadAverage().join(' ')})`);
    try {
      const run = await lifecycleRun(kind);
      results[`table_lifecycle_${kind}`] = run;
      const ratios = run.p99VsBaseline as Record<string, number>;
      results[`table_lifecycle_${kind}_add_p99_vs_baseline`] = ratios.add;
      results[`table_lifecycle_${kind}_add_load_p99_vs_baseline`] = ratios.add_load;
      results[`table_lifecycle_${kind}_resync_p99_vs_baseline`] = ratios.resync;
      results[`table_lifecycle_${kind}_resync_unread_p99_vs_baseline`] = ratios.resync_unread;
      const windows = run.windows as Record<string, { latencyMs: { p50: number; p99: number } }>;
      console.log(
        `  ${kind}: p50/p99 ms: ${Object.entries(windows)
          .map(([name, figures]) => `${name} ${figures.latencyMs.p50}/${figures.latencyMs.p99}`)
          .join(', ')}; p99 ÷ baseline: ${JSON.stringify(ratios)}`,
      );
    } catch (error) {
      failures.push(`${kind}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
      console.error(`  table-lifecycle into ${kind} failed: ${failures.at(-1)}`);
    }
  }
  if (failures.length > 0) throw new PartialGroupFailure(failures.join('\n'), results);
  return results;
}

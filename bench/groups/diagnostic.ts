// Diagnostic: the engine's decoding into a discarding destination, against
// physical baselines on the same source server, with no destination server in
// the way (the figures `make bench` led with before the end-to-end groups).
//
//   snapshot  rows/s of the engine's partitioned COPY into a discarding sink,
//             against one `COPY (SELECT …) TO STDOUT` of the same table
//   cdc       rows/s draining a backlog of changes from a slot into a discarding
//             sink, against pg_recvlogical draining an identical slot
import { execFile } from 'node:child_process';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { to as copyTo } from 'pg-copy-streams';
import pino from 'pino';
import type { PostgresCatalog } from '../../engine/src/catalog/postgres-catalog.ts';
import type { Destination } from '../../engine/src/connectors/destination.ts';
import { readTableInfo } from '../../engine/src/connectors/postgres/source/table-info.ts';
import { createSource } from '../../engine/src/connectors/registry.ts';
import { formatLsn, parseLsn } from '../../engine/src/model/lsn.ts';
import { EngineMetrics } from '../../engine/src/observability/engine-metrics.ts';
import { runCdc } from '../../engine/src/pipeline/cdc.ts';
import { defaultBatchMemoryBudgetBytes, type MirrorContext } from '../../engine/src/pipeline/context.ts';
import { runSnapshot } from '../../engine/src/pipeline/snapshot.ts';
import { destinationTable } from '../../engine/src/pipeline/tables.ts';
import {
  type MirrorSpecInput,
  mirrorSpecSchema,
  tableMappingSchema,
} from '../../engine/src/resources/mirror.ts';
import { createTestDatabase, type TestDatabase } from '../../test/support/databases.ts';
import { DiscardDestination } from '../discard-destination.ts';
import { benchConfig } from '../lib/config.ts';
import { loadAverage } from '../lib/machine.ts';
import type { Catalog } from '../lib/tributary.ts';

const rowCount = benchConfig.rows;
const logger = pino({ level: 'warn' });
const run = promisify(execFile);
/** Slots are per server, not per database: a suffix keeps runs apart. */
const runId = Math.random().toString(36).slice(2, 8);
const slot = (name: string) => `${name}_${runId}`;

const tableShape = `(id bigint PRIMARY KEY, account int NOT NULL, amount numeric(12,2), note text, created timestamptz NOT NULL DEFAULT clock_timestamp())`;
const fillRows = (from: string, to: string) =>
  `SELECT g, g % 1000, g * 0.01, 'note ' || md5(g::text), clock_timestamp() FROM generate_series(${from}, ${to}) g`;

function mapping(table: string) {
  return { source: { schema: 'public', table }, destination: { schema: 'public', table } };
}

const engineMetrics = new EngineMetrics();

function context(
  source: TestDatabase,
  catalog: PostgresCatalog,
  destination: Destination,
  spec: MirrorSpecInput,
  signal: AbortSignal,
): MirrorContext {
  const parsed = mirrorSpecSchema.parse(spec);
  return {
    spec: parsed,
    source: createSource({ kind: 'relational', config: source.config }, { mirror: parsed.name }),
    destination,
    catalog,
    logger,
    signal,
    batchMemoryBudgetBytes: defaultBatchMemoryBudgetBytes,
    // As in an engine process, which always keeps its metrics.
    metrics: engineMetrics,
  };
}

async function seconds<T>(work: () => Promise<T>): Promise<[number, T]> {
  const started = performance.now();
  const result = await work();
  return [(performance.now() - started) / 1000, result];
}

async function benchSnapshot(source: TestDatabase, catalog: PostgresCatalog) {
  await source.client.query(`CREATE TABLE bench_snapshot ${tableShape}`);
  await source.client.query(`INSERT INTO bench_snapshot ${fillRows('1', String(rowCount))}`);
  await source.client.query(`VACUUM ANALYZE bench_snapshot`);

  const copyBaseline = () =>
    seconds(async () => {
      const discard = new Writable({ write: (_chunk, _encoding, done) => done() });
      await pipeline(source.client.query(copyTo(`COPY (SELECT * FROM bench_snapshot) TO STDOUT`)), discard);
    });
  const [baselineBefore] = await copyBaseline();

  const info = await readTableInfo(source.client, { schema: 'public', table: 'bench_snapshot' });
  if (!info) throw new Error('bench_snapshot vanished');
  const destination = new DiscardDestination();
  const spec: MirrorSpecInput = {
    name: 'bench-snapshot',
    sourcePeer: 'source',
    destinationPeer: 'discard',
    tableMappings: [mapping('bench_snapshot')],
    doInitialSnapshot: true,
    snapshotNumRowsPerPartition: Math.ceil(rowCount / 4),
  };
  await catalog.transition('bench-snapshot', 'setup');
  const [engineSeconds] = await seconds(() =>
    runSnapshot(
      context(source, catalog, destination, spec, new AbortController().signal),
      [destinationTable(tableMappingSchema.parse(mapping('bench_snapshot')), info)],
      { name: null, consistentPoint: 0n },
    ),
  );
  if (destination.snapshotRowCount !== rowCount)
    throw new Error(`snapshot copied ${destination.snapshotRowCount} rows`);
  // Best of a run before and after the engine's, so cache warmth favours neither.
  const [baselineAfter] = await copyBaseline();
  const baselineSeconds = Math.min(baselineBefore, baselineAfter);
  return {
    rows: rowCount,
    baselineRowsPerSecond: Math.round(rowCount / baselineSeconds),
    engineRowsPerSecond: Math.round(rowCount / engineSeconds),
    ratio: round(baselineSeconds / engineSeconds),
    engineSettings: '4 partitions, 4 workers',
  };
}

async function benchCdc(source: TestDatabase, catalog: PostgresCatalog) {
  const { client } = source;
  await client.query(`CREATE TABLE bench_cdc ${tableShape}`);
  await client.query(`CREATE PUBLICATION bench_pub FOR TABLE bench_cdc`);
  await client.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [slot('bench_baseline')]);
  await client.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [slot('bench_engine')]);
  await client.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [
    slot('bench_baseline_again'),
  ]);
  const startLsn =
    (await client.query<{ lsn: string }>(`SELECT pg_current_wal_lsn()::text AS lsn`)).rows[0]?.lsn ?? '';
  // The backlog: transactions of 10,000 inserts each.
  const perTransaction = 10_000;
  for (let from = 1; from <= rowCount; from += perTransaction) {
    const to = Math.min(rowCount, from + perTransaction - 1);
    await client.query(`INSERT INTO bench_cdc ${fillRows(String(from), String(to))}`);
  }
  const endLsn =
    (await client.query<{ lsn: string }>(`SELECT pg_current_wal_lsn()::text AS lsn`)).rows[0]?.lsn ?? '';

  const { host, port, user, password, database } = source.config;
  const recvlogical = '/usr/lib/postgresql/15/bin/pg_recvlogical';
  const recvBaseline = (slotName: string) =>
    seconds(() =>
      run(
        recvlogical,
        [
          `--dbname=host=${host} port=${port} user=${user} dbname=${database}`,
          `--slot=${slotName}`,
          '--start',
          `--endpos=${endLsn}`,
          '--option=proto_version=1',
          '--option=publication_names=bench_pub',
          '--no-loop',
          '--file=/dev/null',
        ],
        { env: { ...process.env, PGPASSWORD: password } },
      ),
    );
  const [baselineBefore] = await recvBaseline(slot('bench_baseline'));

  const info = await readTableInfo(client, { schema: 'public', table: 'bench_cdc' });
  if (!info) throw new Error('bench_cdc vanished');
  const destination = new DiscardDestination();
  const controller = new AbortController();
  destination.onChanges((count) => {
    if (count >= rowCount) controller.abort();
  });
  const spec: MirrorSpecInput = {
    name: 'bench-cdc',
    sourcePeer: 'source',
    destinationPeer: 'discard',
    tableMappings: [mapping('bench_cdc')],
    doInitialSnapshot: false,
    idleTimeoutSeconds: 1,
  };
  await catalog.transition('bench-cdc', 'setup');
  const [engineSeconds] = await seconds(() =>
    runCdc(context(source, catalog, destination, spec, controller.signal), {
      slotName: slot('bench_engine'),
      publicationName: 'bench_pub',
      publicationCreatedByMirror: false,
      tables: [destinationTable(tableMappingSchema.parse(mapping('bench_cdc')), info)],
    }),
  );
  if (destination.changeCount !== rowCount) throw new Error(`cdc saw ${destination.changeCount} changes`);
  // Best of a pg_recvlogical run before and after the engine's (WAL cache warmth).
  const [baselineAfter] = await recvBaseline(slot('bench_baseline_again'));
  const baselineSeconds = Math.min(baselineBefore, baselineAfter);
  return {
    changes: rowCount,
    backlogWalBytes: Number(parseLsn(endLsn) - parseLsn(startLsn)),
    baselineRowsPerSecond: Math.round(rowCount / baselineSeconds),
    engineRowsPerSecond: Math.round(rowCount / engineSeconds),
    ratio: round(baselineSeconds / engineSeconds),
    endLsn: formatLsn(parseLsn(endLsn)),
  };
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}

export async function runDiagnosticGroup(catalog: Catalog): Promise<Record<string, unknown>> {
  const source = await createTestDatabase('bench_diag_src');
  try {
    const snapshot = await benchSnapshot(source, catalog.catalog);
    console.log(
      `diagnostic snapshot  engine ${snapshot.engineRowsPerSecond} rows/s, COPY ${snapshot.baselineRowsPerSecond} rows/s, ratio ${snapshot.ratio}`,
    );
    const cdc = await benchCdc(source, catalog.catalog);
    console.log(
      `diagnostic cdc       engine ${cdc.engineRowsPerSecond} rows/s, pg_recvlogical ${cdc.baselineRowsPerSecond} rows/s, ratio ${cdc.ratio}`,
    );
    return { diagnostic: { snapshot, cdc, loadAverage: loadAverage() } };
  } finally {
    await source.drop();
  }
}

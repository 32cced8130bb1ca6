// PostgreSQL → ClickHouse (the test clickhouse-server): Tributary's snapshot
// and CDC of BENCH_ROWS inserts against the raw pipe floor, the source's
// `COPY … TO STDOUT (FORMAT csv)` streamed into `INSERT … FORMAT CSV`.
import pino from 'pino';
import { ClickHouseDestination } from '../../engine/src/connectors/clickhouse/destination.ts';
import type { AnalyticsConfig } from '../../engine/src/resources/peer.ts';
import { clickhouseEngines } from '../../test/support/clickhouse-engines.ts';
import type { TestDatabase } from '../../test/support/databases.ts';
import { benchConfig } from '../lib/config.ts';
import { loadAverage } from '../lib/machine.ts';
import { ServerCpu } from '../lib/server-cpu.ts';
import { sourceDatabase, uniqueName } from '../lib/servers.ts';
import { alternate, describe, describeEach, figure, summarize, timed, until } from '../lib/stats.ts';
import {
  type Catalog,
  cdcUntil,
  destinationTables,
  mappings,
  mirrorSpec,
  snapshot,
  type TableMove,
} from '../lib/tributary.ts';
import { insertRows, tableColumns } from '../lib/workload.ts';
import { clickhouseQuery, copyToClickHouse, floorTableColumns } from '../systems/clickhouse-floor.ts';
import { drainDecodeOnly } from '../systems/source-ceiling.ts';

const { rows, rounds } = benchConfig;
const engine = clickhouseEngines.find((candidate) => !candidate.modern);
if (!engine) throw new Error('no clickhouse-server among the test engines');

async function withDatabase<T>(work: (config: AnalyticsConfig) => Promise<T>): Promise<T> {
  const config = (engine as (typeof clickhouseEngines)[number]).config(uniqueName('bench_ch'));
  await clickhouseQuery(config, `CREATE DATABASE ${config.database}`);
  try {
    return await work(config);
  } finally {
    await clickhouseQuery(config, `DROP DATABASE IF EXISTS ${config.database}`);
  }
}

interface SourceSums {
  readonly rowCount: string;
  readonly idSum: string;
  readonly accountSum: string;
}

async function sourceSums(source: TestDatabase, table: string): Promise<SourceSums> {
  const result = await source.client.query<SourceSums>(
    `SELECT count(*)::text AS "rowCount", sum(id)::text AS "idSum", sum(account)::text AS "accountSum" FROM ${table}`,
  );
  return result.rows[0] as SourceSums;
}

/** Every id once, and the same sums as the source (FINAL: the newest version of each key). */
async function expectSameInClickHouse(
  what: string,
  config: AnalyticsConfig,
  table: string,
  expected: SourceSums,
  final = true,
) {
  const answer = await clickhouseQuery(
    config,
    `SELECT count(), uniqExact(id), sum(id), sum(account) FROM ${config.database}.${table}${final ? ' FINAL' : ''} FORMAT TSV`,
  );
  const [rowCount, distinct, idSum, accountSum] = answer.trim().split('\t');
  if (
    rowCount !== expected.rowCount ||
    distinct !== expected.rowCount ||
    idSum !== expected.idSum ||
    accountSum !== expected.accountSum
  ) {
    throw new Error(`${what}: ClickHouse holds ${answer.trim()}, source ${JSON.stringify(expected)}`);
  }
}

async function clickhouseCount(config: AnalyticsConfig, table: string): Promise<number> {
  return Number(await clickhouseQuery(config, `SELECT count() FROM ${config.database}.${table} FORMAT TSV`));
}

function destination(config: AnalyticsConfig, moves: readonly TableMove[]) {
  return new ClickHouseDestination(config, {
    mirror: 'bench',
    mirrorColumns: {},
    tableMappings: mirrorSpec({ name: 'x', tableMappings: mappings(moves), doInitialSnapshot: false })
      .tableMappings,
    maxBatchSize: 1_000_000,
    logger: pino({ level: 'warn' }),
  });
}

export async function runClickHouseGroup(catalog: Catalog): Promise<Record<string, unknown>> {
  const source = await sourceDatabase('bench_ch_src');
  // cdc: the interface's default batching (the last batch waits up to the
  // idle timeout); streaming: a batch also closes when the stream is drained.
  // ceiling: the same backlog read from a slot by a consumer that only decodes it (source-ceiling.ts).
  const runs: Record<'floor' | 'snapshot' | 'cdc' | 'streaming' | 'ceiling', number[]> = {
    floor: [],
    snapshot: [],
    cdc: [],
    streaming: [],
    ceiling: [],
  };
  // Nanoseconds a row of this process's CPU (the engine runs in it) during
  // each CDC drain, and of the source server's (its walsender, mostly) during
  // each drain, the ceiling's too.
  const engineCpuNsPerRow: Record<'cdc' | 'streaming', number[]> = { cdc: [], streaming: [] };
  const sourceCpuNsPerRow: Record<'cdc' | 'streaming' | 'ceiling', number[]> = {
    cdc: [],
    streaming: [],
    ceiling: [],
  };
  const sourceCpu = await ServerCpu.of(source.client);
  try {
    await source.client.query(`CREATE TABLE chsnap (${tableColumns})`);
    await insertRows(source.client, 'chsnap', rows);
    await source.client.query('VACUUM ANALYZE chsnap');
    const expected = await sourceSums(source, 'chsnap');
    for (let round = 0; round < rounds; round++) {
      for (const system of alternate(['floor', 'snapshot', 'cdc', 'streaming', 'ceiling'] as const, round)) {
        if (system === 'ceiling') {
          const { seconds, sourceSeconds } = await drainBacklog(source, `chceil_${round}`, sourceCpu);
          runs.ceiling.push(rows / seconds);
          sourceCpuNsPerRow.ceiling.push((sourceSeconds * 1e9) / rows);
          console.log(`  clickhouse round ${round + 1} source ceiling: ${Math.round(rows / seconds)} rows/s`);
          continue;
        }
        const seconds = await withDatabase(async (config) => {
          if (system === 'floor') {
            await clickhouseQuery(
              config,
              `CREATE TABLE ${config.database}.chsnap (${floorTableColumns}) ENGINE = MergeTree ORDER BY id`,
            );
            const [elapsed] = await timed(() => copyToClickHouse(source, 'chsnap', config, 'chsnap'));
            await expectSameInClickHouse('clickhouse floor', config, 'chsnap', expected, false);
            return elapsed;
          }
          if (system === 'snapshot') {
            const moves: TableMove[] = [{ sourceTable: 'chsnap', destinationTable: 'chsnap' }];
            const tables = await destinationTables(source, moves);
            const sink = destination(config, moves);
            try {
              await sink.setupTables(tables);
              const spec = mirrorSpec({
                name: uniqueName('bench-ch-snapshot').replace(/_/g, '-'),
                tableMappings: mappings(moves),
                doInitialSnapshot: true,
                snapshotNumRowsPerPartition: Math.ceil(rows / 4),
              });
              const elapsed = await snapshot(source, catalog, sink, spec, tables);
              await expectSameInClickHouse('clickhouse snapshot', config, 'chsnap', expected);
              return elapsed;
            } finally {
              await sink.close();
            }
          }
          const table = `chcdc_${round}`;
          const publication = `${table}_pub`;
          await source.client.query(`CREATE TABLE ${table} (${tableColumns})`);
          await source.client.query(`CREATE PUBLICATION ${publication} FOR TABLE ${table}`);
          const slotName = uniqueName('bench_ch_cdc');
          await source.client.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [slotName]);
          await insertRows(source.client, table, rows);
          const moves: TableMove[] = [{ sourceTable: table, destinationTable: table }];
          const tables = await destinationTables(source, moves);
          const sink = destination(config, moves);
          try {
            await sink.setupTables(tables);
            const spec = mirrorSpec({
              name: uniqueName('bench-ch-cdc').replace(/_/g, '-'),
              tableMappings: mappings(moves),
              doInitialSnapshot: false,
              idleTimeoutSeconds: 1,
              streaming: system === 'streaming',
            });
            const cpuBefore = process.cpuUsage();
            const sourceCpuBefore = sourceCpu.seconds();
            const elapsed = await cdcUntil(
              source,
              catalog,
              sink,
              spec,
              { slotName, publicationName: publication, tables },
              async () => (await clickhouseCount(config, table)) >= rows,
            );
            const cpu = process.cpuUsage(cpuBefore);
            engineCpuNsPerRow[system].push(((cpu.user + cpu.system) * 1000) / rows);
            sourceCpuNsPerRow[system].push(((sourceCpu.seconds() - sourceCpuBefore) * 1e9) / rows);
            await expectSameInClickHouse('clickhouse cdc', config, table, await sourceSums(source, table));
            return elapsed;
          } finally {
            await sink.close();
            await source.client.query(`SELECT pg_drop_replication_slot($1)`, [slotName]);
            await source.client.query(`DROP PUBLICATION ${publication}`);
            await source.client.query(`DROP TABLE ${table}`);
          }
        });
        runs[system].push(rows / seconds);
        console.log(`  clickhouse round ${round + 1} ${system}: ${Math.round(rows / seconds)} rows/s`);
      }
    }
  } finally {
    await source.drop();
  }
  const figures = {
    ch_snapshot_vs_floor: figure('rows/s', runs.snapshot, 'COPY → INSERT FORMAT CSV', runs.floor),
    ch_cdc_vs_floor: figure('rows/s', runs.cdc, 'COPY → INSERT FORMAT CSV', runs.floor),
    ch_cdc_streaming_vs_floor: figure('rows/s', runs.streaming, 'COPY → INSERT FORMAT CSV', runs.floor),
    ch_cdc_streaming_vs_source_ceiling: figure(
      'rows/s',
      runs.streaming,
      'source ceiling (the slot read and decoded, nothing written)',
      runs.ceiling,
    ),
  };
  for (const [name, value] of Object.entries(figures)) console.log(describe(name, value));
  const ceilingSummary = summarize(runs.ceiling);
  const floorSummary = summarize(runs.floor);
  const sourceCeiling = {
    unit: 'rows/s',
    ceiling: ceilingSummary,
    floor: floorSummary,
    ratioToFloor: Math.round((ceilingSummary.median / floorSummary.median) * 1000) / 1000,
    loadAverage: loadAverage(),
  };
  console.log(
    `ch_source_ceiling                ${ceilingSummary.median} (${ceilingSummary.min}–${ceilingSummary.max}) rows/s, ${sourceCeiling.ratioToFloor} of the floor: no CDC system reads this source faster here`,
  );
  const engineCpu = {
    cdc: summarize(engineCpuNsPerRow.cdc),
    streaming: summarize(engineCpuNsPerRow.streaming),
  };
  console.log(
    describeEach('ch_cdc_engine_cpu_ns_per_row', engineCpu, "ns of the engine process's CPU a row"),
  );
  const sourceServerCpu = {
    cdc: summarize(sourceCpuNsPerRow.cdc),
    streaming: summarize(sourceCpuNsPerRow.streaming),
    ceiling: summarize(sourceCpuNsPerRow.ceiling),
  };
  console.log(
    describeEach('ch_cdc_source_cpu_ns_per_row', sourceServerCpu, "ns of the source server's CPU a row"),
  );
  return {
    ...figures,
    ch_source_ceiling: sourceCeiling,
    ch_cdc_engine_cpu_ns_per_row: engineCpu,
    ch_cdc_source_cpu_ns_per_row: sourceServerCpu,
  };
}

/**
 * Seconds to read a backlog of BENCH_ROWS inserts from a new slot by a
 * consumer that only decodes them (source-ceiling.ts), and the source
 * server's CPU seconds during the read.
 */
async function drainBacklog(
  source: TestDatabase,
  table: string,
  sourceCpu: ServerCpu,
): Promise<{ seconds: number; sourceSeconds: number }> {
  const publication = `${table}_pub`;
  const slotName = uniqueName('bench_ch_ceiling');
  await source.client.query(`CREATE TABLE ${table} (${tableColumns})`);
  await source.client.query(`CREATE PUBLICATION ${publication} FOR TABLE ${table}`);
  await source.client.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [slotName]);
  try {
    await insertRows(source.client, table, rows);
    const sourceCpuBefore = sourceCpu.seconds();
    const seconds = await drainDecodeOnly(source, slotName, publication, rows);
    return { seconds, sourceSeconds: sourceCpu.seconds() - sourceCpuBefore };
  } finally {
    // The walsender of the closed stream ends on its own time; the slot is busy until it has.
    await until(
      `${slotName} released`,
      async () =>
        (
          await source.client.query(
            'SELECT 1 FROM pg_replication_slots WHERE slot_name = $1 AND NOT active',
            [slotName],
          )
        ).rowCount === 1,
      60_000,
    );
    await source.client.query(`SELECT pg_drop_replication_slot($1)`, [slotName]);
    await source.client.query(`DROP PUBLICATION ${publication}`);
    await source.client.query(`DROP TABLE ${table}`);
  }
}

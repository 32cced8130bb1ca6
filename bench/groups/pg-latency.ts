// PostgreSQL → PostgreSQL commit-to-visible latency at BENCH_RATE rows/s:
// Tributary with idle_timeout_seconds = 1 (the smallest it accepts), and with
// the `streaming` option (a batch also closes when the stream is drained),
// against PostgreSQL's own logical replication. Both destination tables have a
// `_synced_at` column set to now() by the transaction that wrote the row: the
// apply worker fills it as a column default, Tributary as its synced-at column.
import type { TestDatabase } from '../../test/support/databases.ts';
import { destinationLatencies, latencyRounds, type Percentiles, writeAtRate } from '../lib/latency.ts';
import { sourceDatabase, targetDatabase, uniqueName } from '../lib/servers.ts';
import { describe, type Figure, latencyFigures, until } from '../lib/stats.ts';
import { type Catalog, cdcUntil, destinationTables, mappings, mirrorSpec } from '../lib/tributary.ts';
import { latencyColumns } from '../lib/workload.ts';
import { Subscription } from '../systems/pg-native.ts';
import { postgresDestination } from './pg.ts';

async function count(database: TestDatabase, table: string): Promise<number> {
  const result = await database.client.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
  return result.rows[0]?.n ?? -1;
}

async function nativeRun(source: TestDatabase, table: string, publication: string): Promise<Percentiles> {
  const target = await targetDatabase('bench_pglat_native');
  try {
    await target.client.query(`CREATE TABLE ${table} (${latencyColumns})`);
    const subscription = await Subscription.create(
      source,
      target,
      uniqueName('bench_sub_lat'),
      publication,
      false,
    );
    try {
      await subscription.enable();
      await until(
        'apply worker streaming',
        async () =>
          (
            await source.client.query(`SELECT 1 FROM pg_replication_slots WHERE slot_name = $1 AND active`, [
              subscription.name,
            ])
          ).rowCount === 1,
        60_000,
      );
      const total = await writeAtRate(source.client, table);
      await until('native latency catch-up', async () => (await count(target, table)) === total, 120_000);
      return await destinationLatencies(target.client, table);
    } finally {
      await subscription.drop();
    }
  } finally {
    await target.drop();
  }
}

async function tributaryRun(
  source: TestDatabase,
  catalog: Catalog,
  table: string,
  publication: string,
  streaming: boolean,
): Promise<Percentiles> {
  const target = await targetDatabase('bench_pglat_tributary');
  const destination = postgresDestination(target, 'bench-latency', '_synced_at');
  try {
    const moves = [{ sourceTable: table, destinationTable: table }];
    const tables = await destinationTables(source, moves);
    await destination.setupTables(tables);
    const slotName = uniqueName('bench_tributary_lat');
    await source.client.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [slotName]);
    const spec = mirrorSpec({
      name: uniqueName('bench-pg-latency').replace(/_/g, '-'),
      tableMappings: mappings(moves),
      doInitialSnapshot: false,
      idleTimeoutSeconds: 1,
      streaming,
      syncedAtColName: '_synced_at',
    });
    let total = Number.POSITIVE_INFINITY;
    const running = cdcUntil(
      source,
      catalog,
      destination,
      spec,
      { slotName, publicationName: publication, tables },
      async () => (await count(target, table)) >= total,
    );
    await until(
      'tributary streaming',
      async () =>
        (
          await source.client.query(`SELECT 1 FROM pg_replication_slots WHERE slot_name = $1 AND active`, [
            slotName,
          ])
        ).rowCount === 1,
      60_000,
    );
    total = await writeAtRate(source.client, table);
    await running;
    return await destinationLatencies(target.client, table);
  } finally {
    await destination.close();
    await target.drop();
  }
}

export async function runPostgresLatencyGroup(catalog: Catalog): Promise<Record<string, Figure>> {
  const source = await sourceDatabase('bench_pglat_src');
  let runs: Record<'native' | 'tributary' | 'streaming', Percentiles[]>;
  try {
    runs = await latencyRounds(
      'pg latency',
      source,
      'lat',
      ['native', 'tributary', 'streaming'],
      (system, table, publication) =>
        system === 'native'
          ? nativeRun(source, table, publication)
          : tributaryRun(source, catalog, table, publication, system === 'streaming'),
    );
  } finally {
    await source.drop();
  }
  const figures = {
    ...latencyFigures('pg_latency', '_vs_native', runs.tributary, 'logical replication', runs.native),
    ...latencyFigures(
      'pg_latency_streaming',
      '_vs_native',
      runs.streaming,
      'logical replication',
      runs.native,
    ),
  };
  for (const [name, value] of Object.entries(figures)) console.log(describe(name, value));
  return figures;
}

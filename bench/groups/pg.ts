// PostgreSQL → PostgreSQL (groups pg-snapshot and pg-cdc): the snapshot against the `COPY | COPY` floor and
// PostgreSQL's own logical replication (copy_data), and CDC of inserts,
// updates and deletes against logical replication, each a backlog of
// BENCH_ROWS changes drained into the benchmark's own PostgreSQL server.
import pino from 'pino';
import { PostgresDestination } from '../../engine/src/connectors/postgres/destination/destination.ts';
import type { TestDatabase } from '../../test/support/databases.ts';
import { benchConfig } from '../lib/config.ts';
import { ServerCpu } from '../lib/server-cpu.ts';
import { sourceDatabase, targetDatabase, uniqueName } from '../lib/servers.ts';
import {
  alternate,
  describe,
  describeEach,
  type Figure,
  figure,
  summarize,
  timed,
  until,
} from '../lib/stats.ts';
import {
  type Catalog,
  cdcUntil,
  destinationTables,
  mappings,
  mirrorSpec,
  snapshot,
  type TableMove,
} from '../lib/tributary.ts';
import {
  deleteRows,
  expectSame,
  fingerprint,
  insertRows,
  markerColumns,
  tableColumns,
  updateRows,
} from '../lib/workload.ts';
import { copyPipe } from '../systems/pg-floor.ts';
import { Subscription } from '../systems/pg-native.ts';

const { rows, rounds } = benchConfig;
const quiet = pino({ level: 'warn' });

export function postgresDestination(target: TestDatabase, name: string, syncedAtColumn?: string) {
  return new PostgresDestination(target.config, {
    system: 'PG',
    mirrorColumns: syncedAtColumn ? { syncedAtColumn } : {},
    applicationName: name,
    logger: quiet,
  });
}

async function markerVisible(target: TestDatabase, table: string, id: number): Promise<boolean> {
  const found = await target.client.query(`SELECT 1 FROM ${table} WHERE id = $1`, [id]);
  return found.rowCount === 1;
}

async function snapshotFigures(source: TestDatabase, catalog: Catalog) {
  await source.client.query(`CREATE TABLE snap (${tableColumns})`);
  await insertRows(source.client, 'snap', rows);
  await source.client.query('VACUUM ANALYZE snap');
  await source.client.query('CREATE PUBLICATION snap_pub FOR TABLE snap');
  const expected = await fingerprint(source.client, 'snap');
  const runs: Record<'floor' | 'native' | 'tributary', number[]> = { floor: [], native: [], tributary: [] };
  for (let round = 0; round < rounds; round++) {
    for (const system of alternate(['floor', 'native', 'tributary'] as const, round)) {
      const target = await targetDatabase(`bench_pgsnap_${system}`);
      try {
        let seconds: number;
        if (system === 'tributary') {
          const moves: TableMove[] = [{ sourceTable: 'snap', destinationTable: 'snap' }];
          const tables = await destinationTables(source, moves);
          const destination = postgresDestination(target, 'bench-snapshot');
          await destination.setupTables(tables);
          const spec = mirrorSpec({
            name: uniqueName('bench-pg-snapshot').replace(/_/g, '-'),
            tableMappings: mappings(moves),
            doInitialSnapshot: true,
            snapshotNumRowsPerPartition: Math.ceil(rows / 4),
          });
          seconds = await snapshot(source, catalog, destination, spec, tables);
          await destination.close();
        } else {
          await target.client.query(`CREATE TABLE snap (${tableColumns})`);
          if (system === 'floor') {
            [seconds] = await timed(() => copyPipe(source, 'snap', target, 'snap'));
          } else {
            let subscription: Subscription | undefined;
            try {
              [seconds] = await timed(async () => {
                const created = await Subscription.create(
                  source,
                  target,
                  uniqueName('bench_sub_snap'),
                  'snap_pub',
                  true,
                );
                subscription = created;
                await until('subscription copy', () => created.tablesReady(), 30 * 60_000);
              });
            } finally {
              await subscription?.drop();
            }
          }
        }
        expectSame(`pg snapshot ${system}`, expected, await fingerprint(target.client, 'snap'));
        runs[system].push(rows / seconds);
        console.log(`  pg snapshot round ${round + 1} ${system}: ${Math.round(rows / seconds)} rows/s`);
      } finally {
        await target.drop();
      }
    }
  }
  await source.client.query('DROP PUBLICATION snap_pub');
  await source.client.query('DROP TABLE snap');
  return {
    pg_snapshot_vs_floor: figure('rows/s', runs.tributary, 'COPY | COPY', runs.floor),
    pg_snapshot_vs_native: figure('rows/s', runs.tributary, 'logical replication (copy_data)', runs.native),
  };
}

type Phase = 'insert' | 'update' | 'delete';

/**
 * Tributary runs twice per phase: with the interface's default batching (a
 * batch closes at max_batch_size or after idle_timeout_seconds, so the last
 * batch of a drained backlog waits up to a second) and with `streaming` (a
 * batch also closes once the stream has nothing more buffered).
 */
type CdcSystem = 'native' | 'tributary' | 'streaming';
interface Drain {
  readonly target: TestDatabase;
  readonly destination: PostgresDestination;
  readonly slotName: string;
  readonly spec: ReturnType<typeof mirrorSpec>;
}

async function cdcRound(source: TestDatabase, catalog: Catalog, round: number) {
  const table = `cdc_${round}`;
  const marker = `marker_${round}`;
  const publication = `cdc_pub_${round}`;
  await source.client.query(`CREATE TABLE ${table} (${tableColumns})`);
  await source.client.query(`CREATE TABLE ${marker} (${markerColumns})`);
  await source.client.query(`CREATE PUBLICATION ${publication} FOR TABLE ${table}, ${marker}`);
  const nativeTarget = await targetDatabase('bench_pgcdc_native');
  // tributaryCpuMicros: this process's CPU during Tributary's drain (the
  // engine runs in it), robust to the load where wall clock is not.
  const emptySeconds = () => ({ native: 0, tributary: 0, streaming: 0, tributaryCpuMicros: 0 });
  const seconds: Record<Phase, Record<CdcSystem | 'tributaryCpuMicros', number>> = {
    insert: emptySeconds(),
    update: emptySeconds(),
    delete: emptySeconds(),
  };
  // CPU seconds of the source server (walsenders, the catalog's backends) and
  // of the target server (the apply worker, or Tributary's destination
  // backends) during each drain.
  const serverSeconds = {} as Record<Phase, Record<CdcSystem, { source: number; target: number }>>;
  const sourceCpu = await ServerCpu.of(source.client);
  const targetCpu = await ServerCpu.of(nativeTarget.client);
  let subscription: Subscription | undefined;
  const drains: Partial<Record<'tributary' | 'streaming', Drain>> = {};
  try {
    await nativeTarget.client.query(`CREATE TABLE ${table} (${tableColumns})`);
    await nativeTarget.client.query(`CREATE TABLE ${marker} (${markerColumns})`);
    subscription = await Subscription.create(
      source,
      nativeTarget,
      uniqueName('bench_sub_cdc'),
      publication,
      false,
    );
    const moves: TableMove[] = [
      { sourceTable: table, destinationTable: table },
      { sourceTable: marker, destinationTable: marker },
    ];
    const tables = await destinationTables(source, moves);
    for (const variant of ['tributary', 'streaming'] as const) {
      const target = await targetDatabase(`bench_pgcdc_${variant}`);
      const destination = postgresDestination(target, `bench-cdc-${variant}`);
      drains[variant] = {
        target,
        destination,
        slotName: uniqueName(`bench_${variant}_cdc`),
        spec: mirrorSpec({
          name: uniqueName(`bench-pg-cdc-${variant}`).replace(/_/g, '-'),
          tableMappings: mappings(moves),
          doInitialSnapshot: false,
          idleTimeoutSeconds: 1,
          streaming: variant === 'streaming',
        }),
      };
      await destination.setupTables(tables);
      await source.client.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [
        drains[variant]?.slotName,
      ]);
    }

    const phases: [Phase, () => Promise<void>][] = [
      ['insert', () => insertRows(source.client, table, rows)],
      ['update', () => updateRows(source.client, table, rows)],
      ['delete', () => deleteRows(source.client, table, rows)],
    ];
    for (const [index, [phase, write]] of phases.entries()) {
      await write();
      await source.client.query(`INSERT INTO ${marker} (id) VALUES (${index + 1})`);
      const expected = await fingerprint(source.client, table);
      for (const system of alternate(['native', 'tributary', 'streaming'] as const, round)) {
        const cpuAtStart = { source: sourceCpu.seconds(), target: targetCpu.seconds() };
        const serverCpuOfDrain = () => {
          serverSeconds[phase] ??= {} as Record<CdcSystem, { source: number; target: number }>;
          serverSeconds[phase][system] = {
            source: sourceCpu.seconds() - cpuAtStart.source,
            target: targetCpu.seconds() - cpuAtStart.target,
          };
        };
        if (system === 'native') {
          const sub = subscription;
          [seconds[phase].native] = await timed(async () => {
            await sub.enable();
            await until(
              'subscription apply',
              () => markerVisible(nativeTarget, marker, index + 1),
              30 * 60_000,
            );
          });
          await sub.disable();
          serverCpuOfDrain();
          expectSame(`pg cdc ${phase} native`, expected, await fingerprint(nativeTarget.client, table));
        } else {
          const drain = drains[system] as Drain;
          const cpuBefore = process.cpuUsage();
          seconds[phase][system] = await cdcUntil(
            source,
            catalog,
            drain.destination,
            drain.spec,
            { slotName: drain.slotName, publicationName: publication, tables },
            () => markerVisible(drain.target, marker, index + 1),
          );
          const cpu = process.cpuUsage(cpuBefore);
          serverCpuOfDrain();
          if (system === 'tributary') seconds[phase].tributaryCpuMicros = cpu.user + cpu.system;
          expectSame(`pg cdc ${phase} ${system}`, expected, await fingerprint(drain.target.client, table));
        }
      }
      const rate = (system: CdcSystem) => Math.round(rows / seconds[phase][system]);
      console.log(
        `  pg cdc ${phase} round ${round + 1}: tributary ${rate('tributary')} rows/s, streaming ${rate('streaming')} rows/s, native ${rate('native')} rows/s`,
      );
    }
  } finally {
    for (const drain of Object.values(drains)) {
      await drain.destination.close();
      await drain.target.drop();
      await source.client.query(`SELECT pg_drop_replication_slot($1)`, [drain.slotName]).catch(() => {});
    }
    await subscription?.drop().catch(() => {});
    await nativeTarget.drop();
    await source.client.query(`DROP PUBLICATION ${publication}`);
    await source.client.query(`DROP TABLE ${table}, ${marker}`);
  }
  return { seconds, serverSeconds };
}

export async function runPostgresSnapshotGroup(catalog: Catalog): Promise<Record<string, Figure>> {
  const source = await sourceDatabase('bench_pgsnap_src');
  try {
    const figures = await snapshotFigures(source, catalog);
    for (const [name, value] of Object.entries(figures)) console.log(describe(name, value));
    return figures;
  } finally {
    await source.drop();
  }
}

export async function runPostgresCdcGroup(catalog: Catalog): Promise<Record<string, unknown>> {
  const source = await sourceDatabase('bench_pgcdc_src');
  try {
    const measured: Awaited<ReturnType<typeof cdcRound>>[] = [];
    for (let round = 0; round < rounds; round++) measured.push(await cdcRound(source, catalog, round));
    const perRound = measured.map((round) => round.seconds);
    const figures: Record<string, Figure> = {};
    for (const phase of ['insert', 'update', 'delete'] as const) {
      figures[`pg_cdc_${phase}_vs_native`] = figure(
        'rows/s',
        perRound.map((seconds) => rows / seconds[phase].tributary),
        'logical replication',
        perRound.map((seconds) => rows / seconds[phase].native),
      );
      figures[`pg_cdc_${phase}_streaming_vs_native`] = figure(
        'rows/s',
        perRound.map((seconds) => rows / seconds[phase].streaming),
        'logical replication',
        perRound.map((seconds) => rows / seconds[phase].native),
      );
    }
    for (const [name, value] of Object.entries(figures)) console.log(describe(name, value));
    const engineCpu = Object.fromEntries(
      (['insert', 'update', 'delete'] as const).map((phase) => [
        phase,
        summarize(perRound.map((seconds) => (seconds[phase].tributaryCpuMicros * 1000) / rows)),
      ]),
    );
    console.log(
      describeEach('pg_cdc_engine_cpu_ns_per_row', engineCpu, "ns of the engine process's CPU a row"),
    );
    const serverCpu = Object.fromEntries(
      (['insert', 'update', 'delete'] as const).map((phase) => [
        phase,
        Object.fromEntries(
          (['native', 'tributary', 'streaming'] as const).map((system) => [
            system,
            Object.fromEntries(
              (['source', 'target'] as const).map((side) => [
                side,
                summarize(measured.map((round) => (round.serverSeconds[phase][system][side] * 1e9) / rows)),
              ]),
            ),
          ]),
        ),
      ]),
    );
    for (const [phase, systems] of Object.entries(serverCpu)) {
      console.log(
        `pg_cdc_server_cpu_ns_per_row     ${phase}: ${Object.entries(systems)
          .map(
            ([system, sides]) => `${system} source ${sides.source?.median}, target ${sides.target?.median}`,
          )
          .join('; ')} ns of the servers' CPU a row (medians)`,
      );
    }
    return { ...figures, pg_cdc_engine_cpu_ns_per_row: engineCpu, pg_cdc_server_cpu_ns_per_row: serverCpu };
  } finally {
    await source.drop();
  }
}

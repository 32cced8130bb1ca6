// PostgreSQL → Kafka: Tributary's snapshot and CDC (a backlog of BENCH_ROWS
// inserts) against Debezium Server on the same table into the same broker,
// one partition each. Rates are taken over the span of the messages' producer
// timestamps (first to last), so Debezium's JVM start-up is not counted
// against it; the wall time of each run is recorded too.
import pino from 'pino';
import { KafkaDestination } from '../../engine/src/connectors/kafka/destination.ts';
import { streamConfig } from '../../test/integration/kafka-support.ts';
import type { TestDatabase } from '../../test/support/databases.ts';
import { benchConfig } from '../lib/config.ts';
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
import { type DebeziumInstall, DebeziumServer, debeziumTopic, installDebezium } from '../systems/debezium.ts';
import {
  closeMessageCounter,
  createTopic,
  deleteTopic,
  expectEveryIdOnce,
  messageCount,
  readTopic,
} from '../systems/kafka-topic.ts';

const { rows, rounds } = benchConfig;

export function kafkaDestination(mirror: string) {
  return new KafkaDestination(streamConfig('PLAINTEXT'), {
    mirror,
    logger: pino({ level: 'warn' }),
  });
}

interface Run {
  readonly spanRowsPerSecond: number;
  readonly wallSeconds: number;
}

/** A Tributary run, with the CPU the engine (this process) spent a row. */
type TributaryRun = Run & { readonly engineCpuNsPerRow: number };

/** Checks the topic and takes the rate over its messages' timestamps. */
async function measure(what: string, topic: string, wallSeconds: number): Promise<Run> {
  const contents = await readTopic(topic, rows, false);
  expectEveryIdOnce(what, contents, rows);
  const spanSeconds = Math.max(0.001, (contents.lastMs - contents.firstMs) / 1000);
  return { spanRowsPerSecond: rows / spanSeconds, wallSeconds };
}

async function tributaryRun(
  source: TestDatabase,
  catalog: Catalog,
  table: string,
  mode: 'snapshot' | { slotName: string; publicationName: string; streaming: boolean },
): Promise<TributaryRun> {
  const topic = uniqueName(`bench-tributary-${table}`).replace(/_/g, '-');
  await createTopic(topic);
  const name = uniqueName('bench-kafka').replace(/_/g, '-');
  const destination = kafkaDestination(name);
  try {
    const moves: TableMove[] = [{ sourceTable: table, destinationTable: topic }];
    const tables = await destinationTables(source, moves);
    await destination.setupTables(tables);
    let wallSeconds: number;
    // The engine runs in this process: its CPU during the run, a row.
    const cpuBefore = process.cpuUsage();
    if (mode === 'snapshot') {
      const spec = mirrorSpec({
        name,
        tableMappings: mappings(moves),
        doInitialSnapshot: true,
        snapshotNumRowsPerPartition: Math.ceil(rows / 4),
      });
      wallSeconds = await snapshot(source, catalog, destination, spec, tables);
    } else {
      const spec = mirrorSpec({
        name,
        tableMappings: mappings(moves),
        doInitialSnapshot: false,
        idleTimeoutSeconds: 1,
        streaming: mode.streaming,
      });
      wallSeconds = await cdcUntil(
        source,
        catalog,
        destination,
        spec,
        { slotName: mode.slotName, publicationName: mode.publicationName, tables },
        async () => (await messageCount(topic)) >= rows,
      );
    }
    const cpu = process.cpuUsage(cpuBefore);
    const engineCpuNsPerRow = Math.round(((cpu.user + cpu.system) * 1000) / rows);
    return { ...(await measure(`kafka ${table} tributary`, topic, wallSeconds)), engineCpuNsPerRow };
  } finally {
    await destination.close();
    await deleteTopic(topic);
  }
}

async function debeziumRun(
  install: DebeziumInstall,
  source: TestDatabase,
  table: string,
  slotName: string,
  publicationName: string,
  snapshotMode: 'initial' | 'no_data',
): Promise<Run & { peakRssMiB: number }> {
  const run = {
    source,
    table,
    topicPrefix: uniqueName('bench_dbz'),
    slotName,
    publicationName,
    snapshotMode,
  };
  const topic = debeziumTopic(run);
  await createTopic(topic);
  let server: DebeziumServer | undefined;
  try {
    let peakRssMiB = Number.NaN;
    const [wallSeconds] = await timed(async () => {
      const started = DebeziumServer.start(install, run);
      server = started;
      await until(
        'debezium',
        async () => {
          started.assertRunning();
          return (await messageCount(topic)) >= rows;
        },
        30 * 60_000,
        200,
      );
      peakRssMiB = started.peakRssMiB();
    });
    await server?.stop();
    return { ...(await measure(`kafka ${table} debezium`, topic, wallSeconds)), peakRssMiB };
  } finally {
    await server?.stop();
    await deleteTopic(topic);
  }
}

export async function runKafkaGroup(catalog: Catalog): Promise<Record<string, unknown>> {
  const install = installDebezium();
  const source = await sourceDatabase('bench_kafka_src');
  const runs = {
    snapshot: { tributary: [] as TributaryRun[], debezium: [] as Run[] },
    // streaming: Tributary with the `streaming` option (the default's last
    // batch waits up to the idle timeout before it is sent).
    cdc: { tributary: [] as TributaryRun[], streaming: [] as TributaryRun[], debezium: [] as Run[] },
  };
  const debeziumPeakRssMiB: number[] = [];
  try {
    await source.client.query(`CREATE TABLE ksnap (${tableColumns})`);
    await insertRows(source.client, 'ksnap', rows);
    await source.client.query('VACUUM ANALYZE ksnap');
    await source.client.query('CREATE PUBLICATION ksnap_pub FOR TABLE ksnap');
    for (let round = 0; round < rounds; round++) {
      for (const system of alternate(['debezium', 'tributary'] as const, round)) {
        if (system === 'tributary') {
          runs.snapshot.tributary.push(await tributaryRun(source, catalog, 'ksnap', 'snapshot'));
        } else {
          const slotName = uniqueName('bench_dbz_snap');
          const result = await debeziumRun(install, source, 'ksnap', slotName, 'ksnap_pub', 'initial');
          await source.client.query(`SELECT pg_drop_replication_slot($1)`, [slotName]);
          runs.snapshot.debezium.push(result);
          debeziumPeakRssMiB.push(result.peakRssMiB);
        }
        console.log(
          `  kafka snapshot round ${round + 1} ${system}: ${JSON.stringify(runs.snapshot[system].at(-1))}`,
        );
      }
    }
    for (let round = 0; round < rounds; round++) {
      const table = `kcdc_${round}`;
      const publicationName = `${table}_pub`;
      await source.client.query(`CREATE TABLE ${table} (${tableColumns})`);
      await source.client.query(`CREATE PUBLICATION ${publicationName} FOR TABLE ${table}`);
      const slots = {
        tributary: uniqueName('bench_trib_kcdc'),
        streaming: uniqueName('bench_strm_kcdc'),
        debezium: uniqueName('bench_dbz_kcdc'),
      };
      for (const slot of Object.values(slots)) {
        await source.client.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [slot]);
      }
      await insertRows(source.client, table, rows);
      for (const system of alternate(['debezium', 'tributary', 'streaming'] as const, round)) {
        if (system !== 'debezium') {
          runs.cdc[system].push(
            await tributaryRun(source, catalog, table, {
              slotName: slots[system],
              publicationName,
              streaming: system === 'streaming',
            }),
          );
        } else {
          const result = await debeziumRun(
            install,
            source,
            table,
            slots.debezium,
            publicationName,
            'no_data',
          );
          runs.cdc.debezium.push(result);
          debeziumPeakRssMiB.push(result.peakRssMiB);
        }
        console.log(`  kafka cdc round ${round + 1} ${system}: ${JSON.stringify(runs.cdc[system].at(-1))}`);
      }
      for (const slot of Object.values(slots)) {
        await source.client.query(`SELECT pg_drop_replication_slot($1)`, [slot]);
      }
    }
  } finally {
    await closeMessageCounter();
    await source.drop();
  }
  const rate = (list: Run[]) => list.map((run) => run.spanRowsPerSecond);
  const wall = (list: Run[]) => list.map((run) => rows / run.wallSeconds);
  const figures = {
    kafka_snapshot_vs_debezium: figure(
      'rows/s',
      rate(runs.snapshot.tributary),
      'Debezium Server',
      rate(runs.snapshot.debezium),
    ),
    kafka_cdc_vs_debezium: figure(
      'rows/s',
      rate(runs.cdc.tributary),
      'Debezium Server',
      rate(runs.cdc.debezium),
    ),
    kafka_cdc_streaming_vs_debezium: figure(
      'rows/s',
      rate(runs.cdc.streaming),
      'Debezium Server',
      rate(runs.cdc.debezium),
    ),
    kafka_snapshot_wall_vs_debezium: figure(
      'rows/s',
      wall(runs.snapshot.tributary),
      'Debezium Server (with its start-up)',
      wall(runs.snapshot.debezium),
    ),
    kafka_cdc_wall_vs_debezium: figure(
      'rows/s',
      wall(runs.cdc.tributary),
      'Debezium Server (with its start-up)',
      wall(runs.cdc.debezium),
    ),
  };
  for (const [name, value] of Object.entries(figures)) console.log(describe(name, value));
  const cpu = (list: TributaryRun[]) => summarize(list.map((run) => run.engineCpuNsPerRow));
  const engineCpu = {
    snapshot: cpu(runs.snapshot.tributary),
    cdc: cpu(runs.cdc.tributary),
    streaming: cpu(runs.cdc.streaming),
  };
  console.log(describeEach('kafka_engine_cpu_ns_per_row', engineCpu, "ns of the engine process's CPU a row"));
  return { ...figures, kafka_engine_cpu_ns_per_row: engineCpu, debezium_peak_rss_mib: debeziumPeakRssMiB };
}

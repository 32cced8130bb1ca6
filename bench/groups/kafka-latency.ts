// PostgreSQL → Kafka latency at BENCH_RATE rows/s: from the row's insert time
// (`created`, a few ms before its commit) to the message's producer timestamp,
// Tributary (idle_timeout_seconds = 1, and with the `streaming` option) against
// Debezium Server.
import type { TestDatabase } from '../../test/support/databases.ts';
import { latencyRounds, type Percentiles, percentiles, writeAtRate } from '../lib/latency.ts';
import { sourceDatabase, uniqueName } from '../lib/servers.ts';
import { describe, type Figure, latencyFigures, until } from '../lib/stats.ts';
import { type Catalog, cdcUntil, destinationTables, mappings, mirrorSpec } from '../lib/tributary.ts';
import { type DebeziumInstall, DebeziumServer, debeziumTopic, installDebezium } from '../systems/debezium.ts';
import {
  closeMessageCounter,
  createTopic,
  deleteTopic,
  expectEveryIdOnce,
  messageCount,
  readTopic,
} from '../systems/kafka-topic.ts';
import { kafkaDestination } from './kafka.ts';

async function slotActive(source: TestDatabase, slotName: string): Promise<boolean> {
  const found = await source.client.query(
    `SELECT 1 FROM pg_replication_slots WHERE slot_name = $1 AND active`,
    [slotName],
  );
  return found.rowCount === 1;
}

async function latencies(what: string, topic: string, total: number): Promise<Percentiles> {
  const contents = await readTopic(topic, total, true);
  expectEveryIdOnce(what, contents, total);
  return percentiles(contents.latenciesMs);
}

async function tributaryRun(
  source: TestDatabase,
  catalog: Catalog,
  table: string,
  publicationName: string,
  streaming: boolean,
) {
  const topic = uniqueName(`bench-tributary-${table}`).replace(/_/g, '-');
  await createTopic(topic);
  const name = uniqueName('bench-kafka-latency').replace(/_/g, '-');
  const destination = kafkaDestination(name);
  try {
    const moves = [{ sourceTable: table, destinationTable: topic }];
    const tables = await destinationTables(source, moves);
    await destination.setupTables(tables);
    const slotName = uniqueName('bench_trib_klat');
    await source.client.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [slotName]);
    const spec = mirrorSpec({
      name,
      tableMappings: mappings(moves),
      doInitialSnapshot: false,
      idleTimeoutSeconds: 1,
      streaming,
    });
    let total = Number.POSITIVE_INFINITY;
    const running = cdcUntil(
      source,
      catalog,
      destination,
      spec,
      { slotName, publicationName, tables },
      async () => (await messageCount(topic)) >= total,
    );
    await until('tributary streaming', () => slotActive(source, slotName), 60_000);
    total = await writeAtRate(source.client, table);
    await running;
    return await latencies('kafka latency tributary', topic, total);
  } finally {
    await destination.close();
    await deleteTopic(topic);
  }
}

async function debeziumRun(
  install: DebeziumInstall,
  source: TestDatabase,
  table: string,
  publicationName: string,
) {
  const slotName = uniqueName('bench_dbz_klat');
  await source.client.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [slotName]);
  const run = {
    source,
    table,
    topicPrefix: uniqueName('bench_dbz_lat'),
    slotName,
    publicationName,
    snapshotMode: 'no_data' as const,
  };
  const topic = debeziumTopic(run);
  await createTopic(topic);
  const server = DebeziumServer.start(install, run);
  try {
    await until(
      'debezium streaming',
      async () => {
        server.assertRunning();
        return slotActive(source, slotName);
      },
      120_000,
      200,
    );
    const total = await writeAtRate(source.client, table);
    await until(
      'debezium catch-up',
      async () => {
        server.assertRunning();
        return (await messageCount(topic)) >= total;
      },
      120_000,
      200,
    );
    await server.stop();
    return await latencies('kafka latency debezium', topic, total);
  } finally {
    await server.stop();
    await deleteTopic(topic);
  }
}

export async function runKafkaLatencyGroup(catalog: Catalog): Promise<Record<string, Figure>> {
  const install = installDebezium();
  const source = await sourceDatabase('bench_klat_src');
  let runs: Record<'debezium' | 'tributary' | 'streaming', Percentiles[]>;
  try {
    runs = await latencyRounds(
      'kafka latency',
      source,
      'klat',
      ['debezium', 'tributary', 'streaming'],
      (system, table, publication) =>
        system === 'debezium'
          ? debeziumRun(install, source, table, publication)
          : tributaryRun(source, catalog, table, publication, system === 'streaming'),
    );
  } finally {
    await closeMessageCounter();
    await source.drop();
  }
  const figures = {
    ...latencyFigures('kafka_latency', '_vs_debezium', runs.tributary, 'Debezium Server', runs.debezium),
    ...latencyFigures(
      'kafka_latency_streaming',
      '_vs_debezium',
      runs.streaming,
      'Debezium Server',
      runs.debezium,
    ),
  };
  for (const [name, value] of Object.entries(figures)) console.log(describe(name, value));
  return figures;
}

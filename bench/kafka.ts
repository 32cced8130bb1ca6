// PostgreSQL to Kafka throughput, by hand: `node bench/kafka.ts` with the test
// services up (`make testenv-up`). Not a test: it prints figures, asserts nothing.
//
//   cdc        messages/s of the engine draining a slot of BENCH_ROWS inserts
//              into the Kafka destination (PLAINTEXT listener, 1 partition),
//              with and without a script
//   baseline   messages/s of a bare kafkajs producer (idempotent, acks=all,
//              one request in flight, requests cut as the destination cuts them) sending the
//              very payloads the destination sent
//   script     µs per record of the default format alone and of a script's
//              onRecord (record built, pushed into Lua, result read back)
//
// BENCH_ROWS defaults to 200,000.
import { cpus } from 'node:os';
import type { Message } from 'kafkajs';
import kafkajs from 'kafkajs';
import pg from 'pg';
import pino from 'pino';
import { PostgresCatalog } from '../engine/src/catalog/postgres-catalog.ts';
import type { Destination } from '../engine/src/connectors/destination.ts';
import { defaultChunkBytes, recordOverheadBytes } from '../engine/src/connectors/kafka/apply.ts';
import { maxChunkMessages } from '../engine/src/connectors/kafka/chunk-sender.ts';
import { KafkaDestination } from '../engine/src/connectors/kafka/destination.ts';
import { tableFormat } from '../engine/src/connectors/kafka/message-format.ts';
import { changeRecord, luaRecord } from '../engine/src/connectors/kafka/script-records.ts';
import { readTableInfo } from '../engine/src/connectors/postgres/source/table-info.ts';
import type {
  ChangeBatch,
  DestinationTable,
  RowChange,
  TableAlteration,
} from '../engine/src/connectors/records.ts';
import { createSource } from '../engine/src/connectors/registry.ts';
import { rowOfCells } from '../engine/src/connectors/rows.ts';
import { runCdc } from '../engine/src/pipeline/cdc.ts';
import { defaultBatchMemoryBudgetBytes } from '../engine/src/pipeline/context.ts';
import { destinationTable } from '../engine/src/pipeline/tables.ts';
import { mirrorSpecSchema, tableMappingSchema } from '../engine/src/resources/mirror.ts';
import { RecordScript, scriptBatchRecords } from '../engine/src/scripting/record-script.ts';
import {
  createTopics,
  deleteTopics,
  kafkaClient,
  randomTopic,
  streamConfig,
} from '../test/integration/kafka-support.ts';
import { createTestDatabase, type TestDatabase } from '../test/support/databases.ts';

const rowCount = Number(process.env.BENCH_ROWS ?? 200_000);
const logger = pino({ level: 'warn' });
const runId = Math.random().toString(36).slice(2, 8);

const script = `
function onRecord(r)
  if r.kind == 'delete' then return nil end
  return { topic = '${'TOPIC'}', key = tostring(r.row.id), value = json.encode({ id = r.row.id, account = r.row.account, amount = r.row.amount, note = r.row.note }) }
end`;

/** Counts what reaches the real destination and stops the CDC run at `rowCount`. */
class Counting implements Destination {
  readonly inner: Destination;
  readonly #stop: AbortController;
  changes = 0;
  /** The inner destination's, so batches reach it in the form it takes them. */
  readonly changeBuffer: Destination['changeBuffer'];
  constructor(inner: Destination, stop: AbortController) {
    this.inner = inner;
    this.#stop = stop;
    this.changeBuffer = inner.changeBuffer?.bind(inner);
  }
  check() {
    return this.inner.check();
  }
  close() {
    return this.inner.close();
  }
  setupTables(tables: readonly DestinationTable[]) {
    return this.inner.setupTables(tables);
  }
  tableStates(tables: readonly DestinationTable[]) {
    return this.inner.tableStates(tables);
  }
  truncateTables(tables: readonly DestinationTable[]) {
    return this.inner.truncateTables(tables);
  }
  writeSnapshotPartition(table: DestinationTable, copyText: import('node:stream').Readable) {
    return this.inner.writeSnapshotPartition(table, copyText);
  }
  async syncBatch(batch: ChangeBatch) {
    await this.inner.syncBatch(batch);
    this.changes += batch.rowCount;
    if (this.changes >= rowCount) this.#stop.abort();
  }
  readCheckpoint(mirror: string) {
    return this.inner.readCheckpoint(mirror);
  }
  refuseAlteration(alteration: TableAlteration) {
    return this.inner.refuseAlteration(alteration);
  }
  alterColumns(alteration: TableAlteration) {
    return this.inner.alterColumns(alteration);
  }
  removeCheckpoint(mirror: string) {
    return this.inner.removeCheckpoint(mirror);
  }
}

async function cdcRun(
  source: TestDatabase,
  catalog: PostgresCatalog,
  table: DestinationTable,
  slot: string,
  label: string,
  withScript: string | undefined,
): Promise<number> {
  const stop = new AbortController();
  const name = `bench-kafka-${label}-${runId}`;
  const destination = new Counting(
    new KafkaDestination(streamConfig('PLAINTEXT'), {
      mirror: name,
      logger,
      ...(withScript ? { script: { name: 'bench', lang: 'lua' as const, source: withScript } } : {}),
    }),
    stop,
  );
  await destination.setupTables([table]);
  await catalog.transition(name, 'setup');
  const spec = mirrorSpecSchema.parse({
    name,
    sourcePeer: 'source',
    destinationPeer: 'kafka',
    tableMappings: [mapping(table.destination.table)],
    doInitialSnapshot: false,
    idleTimeoutSeconds: 1,
    maxBatchSize: 100_000,
  });
  const started = performance.now();
  await runCdc(
    {
      spec,
      source: createSource({ kind: 'relational', config: source.config }, { mirror: spec.name }),
      destination,
      catalog,
      logger,
      signal: stop.signal,
      batchMemoryBudgetBytes: defaultBatchMemoryBudgetBytes,
    },
    {
      slotName: slot,
      publicationName: `bench_kafka_pub_${runId}`,
      publicationCreatedByMirror: false,
      tables: [table],
    },
  );
  const seconds = (performance.now() - started) / 1000;
  await destination.close();
  if (destination.changes !== rowCount) throw new Error(`${label}: ${destination.changes} changes`);
  return Math.round(rowCount / seconds);
}

function mapping(topic: string) {
  return {
    source: { schema: 'public', table: 'bench_kafka' },
    destination: { schema: 'public', table: topic },
  };
}

/** The destination's own payloads, sent by a bare producer in the same 512 KiB requests. */
async function baseline(topic: string, messages: readonly Message[]): Promise<number> {
  const producer = kafkaClient('PLAINTEXT').producer({
    idempotent: true,
    maxInFlightRequests: 1,
    createPartitioner: kafkajs.Partitioners.DefaultPartitioner,
  });
  await producer.connect();
  const started = performance.now();
  let chunk: Message[] = [];
  let bytes = 0;
  for (const message of messages) {
    chunk.push(message);
    bytes += recordOverheadBytes + String(message.key).length + String(message.value).length;
    if (bytes >= defaultChunkBytes || chunk.length >= maxChunkMessages) {
      await producer.sendBatch({ acks: -1, topicMessages: [{ topic, messages: chunk }] });
      chunk = [];
      bytes = 0;
    }
  }
  if (chunk.length > 0) await producer.sendBatch({ acks: -1, topicMessages: [{ topic, messages: chunk }] });
  const seconds = (performance.now() - started) / 1000;
  await producer.disconnect();
  return Math.round(messages.length / seconds);
}

async function main(): Promise<void> {
  const [source, catalogDb] = await Promise.all([
    createTestDatabase('bench_kafka_src'),
    createTestDatabase('bench_kafka_cat'),
  ]);
  const pool = new pg.Pool({ ...catalogDb.config, max: 2 });
  const catalog = new PostgresCatalog(pool);
  const admin = kafkaClient('PLAINTEXT');
  const topics = ['plain', 'scripted', 'scripted-out', 'baseline'].map((label) =>
    randomTopic(`bench-${label}`),
  );
  const [plainTopic = '', scriptedTopic = '', scriptedOut = '', baselineTopic = ''] = topics;
  try {
    await catalog.migrate();
    await createTopics(admin, topics, 1);
    const { client } = source;
    await client.query(
      `CREATE TABLE bench_kafka (id bigint PRIMARY KEY, account int NOT NULL, amount numeric(12,2), note text, created timestamptz NOT NULL DEFAULT clock_timestamp())`,
    );
    await client.query(`CREATE PUBLICATION bench_kafka_pub_${runId} FOR TABLE bench_kafka`);
    for (const label of ['plain', 'scripted']) {
      await client.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [
        `bench_${label}_${runId}`,
      ]);
    }
    for (let from = 1; from <= rowCount; from += 10_000) {
      const to = Math.min(rowCount, from + 9_999);
      await client.query(
        `INSERT INTO bench_kafka SELECT g, g % 1000, g * 0.01, 'note ' || md5(g::text), clock_timestamp() FROM generate_series(${from}, ${to}) g`,
      );
    }
    const info = await readTableInfo(client, { schema: 'public', table: 'bench_kafka' });
    if (!info) throw new Error('bench_kafka vanished');
    const tableFor = (topic: string) => destinationTable(tableMappingSchema.parse(mapping(topic)), info);

    console.log(`bench kafka: ${rowCount} rows, ${cpus().length} cores, ${process.version}`);
    const plain = await cdcRun(
      source,
      catalog,
      tableFor(plainTopic),
      `bench_plain_${runId}`,
      'plain',
      undefined,
    );
    console.log(`cdc       engine → Kafka, default format: ${plain} messages/s`);
    const scripted = await cdcRun(
      source,
      catalog,
      tableFor(scriptedTopic),
      `bench_scripted_${runId}`,
      'scripted',
      script.replace('TOPIC', scriptedOut),
    );
    console.log(`cdc       engine → Kafka, with a script:  ${scripted} messages/s`);

    // The same payloads the default format produced, from the same rows.
    const table = tableFor(baselineTopic);
    const format = tableFormat(table);
    await client.query(`SET TimeZone = 'UTC'`);
    const rows = await client.query<(string | null)[]>({
      text: `SELECT id::text, account::text, amount::text, note, created::text FROM bench_kafka ORDER BY id`,
      rowMode: 'array',
    });
    const transaction = { xid: 1, commitLsn: 0x1000n, commitTimeMicros: 1_767_225_600_000_000n };
    const changes: RowChange[] = rows.rows.map((row) => ({
      kind: 'insert',
      transaction,
      newRow: rowOfCells(row),
    }));
    let started = performance.now();
    const messages: Message[] = changes.map((change) => {
      const record = changeRecord(format, change);
      return { key: record.key, value: record.json };
    });
    const formatMicros = ((performance.now() - started) * 1000) / changes.length;
    const bare = await baseline(baselineTopic, messages);
    console.log(
      `baseline  bare kafkajs producer, same payloads: ${bare} messages/s (engine ratio ${(plain / bare).toFixed(2)})`,
    );

    const recordScript = new RecordScript(
      { name: 'bench', lang: 'lua', source: script.replace('TOPIC', scriptedOut) },
      { logger },
    );
    await recordScript.ready();
    const sample = changes.slice(0, Math.min(50_000, changes.length));
    started = performance.now();
    // In runs, as the destination hands records to the script's thread.
    for (let first = 0; first < sample.length; first += scriptBatchRecords) {
      await recordScript.transform(
        sample
          .slice(first, first + scriptBatchRecords)
          .map((change) => luaRecord(changeRecord(format, change))),
      );
    }
    const scriptMicros = ((performance.now() - started) * 1000) / sample.length;
    await recordScript.close();
    console.log(
      `script    default format ${formatMicros.toFixed(1)} µs/record; format + onRecord ${scriptMicros.toFixed(1)} µs/record`,
    );
  } finally {
    await deleteTopics(admin, topics).catch(() => {});
    await pool.end();
    await source.client
      .query(`SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE $1`, [
        `%_${runId}`,
      ])
      .catch(() => {});
    await Promise.all([source.drop(), catalogDb.drop()]);
  }
}

await main();

// The engine's CPU per change with no network and no destination server, by
// hand: `node bench/engine-replay.ts` with the test services up. Not a test:
// it prints figures, asserts nothing but that every change was applied.
//
// BENCH_ROWS inserts, then updates, then deletes (the benchmark's table and
// transactions of 10,000 rows) are drained once from a slot each and their
// CopyData payloads kept; each is then replayed BENCH_REPS times through what
// the engine does with them: parse and decode (pgoutput.ts), the change
// applier and its batches (change-applier.ts, into batches of BENCH_BATCH_MIB,
// default the CDC loop's 32), and the PostgreSQL destination's change buffer
// with its COPY text (table-changes.ts). Printed per change: the
// process's CPU, and the time V8's garbage collector took within it.
//
// BENCH_ROWS defaults to 200,000 and BENCH_REPS to 5; the first repetition
// includes the compiler's warm-up.
import { PerformanceObserver } from 'node:perf_hooks';
import { both as copyBoth } from 'pg-copy-streams';
import type { StreamEvent } from '../engine/src/connectors/changes.ts';
import type { Destination } from '../engine/src/connectors/destination.ts';
import { PostgresTableChanges } from '../engine/src/connectors/postgres/destination/table-changes.ts';
import { connectPostgres } from '../engine/src/connectors/postgres/driver/connect.ts';
import { decodePgoutput } from '../engine/src/connectors/postgres/source/pgoutput.ts';
import { parseReplicationMessage } from '../engine/src/connectors/postgres/source/replication-messages.ts';
import { readTableInfo } from '../engine/src/connectors/postgres/source/table-info.ts';
import type { ChangeBatch, DestinationTable } from '../engine/src/connectors/records.ts';
import { ChangeApplier } from '../engine/src/pipeline/change-applier.ts';
import { destinationTable } from '../engine/src/pipeline/tables.ts';
import { tableMappingSchema } from '../engine/src/resources/mirror.ts';
import type { TestDatabase } from '../test/support/databases.ts';
import { sourceDatabase, uniqueName } from './lib/servers.ts';
import { deleteRows, insertRows, tableColumns, updateRows } from './lib/workload.ts';

const rows = Number(process.env.BENCH_ROWS ?? 200_000);
const repetitions = Number(process.env.BENCH_REPS ?? 5);
const batchBytes = Number(process.env.BENCH_BATCH_MIB ?? 32) * 1024 * 1024;
const phases = ['insert', 'update', 'delete'] as const;
type Phase = (typeof phases)[number];

let gcMilliseconds = 0;
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) gcMilliseconds += entry.duration;
}).observe({ entryTypes: ['gc'] });
/** GC entries are delivered from a timer phase of the event loop: a timer's turn comes after them. */
const gcSoFar = async () => {
  await new Promise((resolve) => setTimeout(resolve, 10));
  return gcMilliseconds;
};

/** The phase's changes as the slot sends them: every CopyData payload up to the last commit. */
async function record(source: TestDatabase, phase: Phase): Promise<Buffer[]> {
  const slot = uniqueName(`replay_${phase}`);
  await source.client.query(`DROP TABLE IF EXISTS t; CREATE TABLE t (${tableColumns})`);
  await source.client.query(`DROP PUBLICATION IF EXISTS p; CREATE PUBLICATION p FOR TABLE t`);
  if (phase !== 'insert') await insertRows(source.client, 't', rows);
  await source.client.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [slot]);
  const write = { insert: insertRows, update: updateRows, delete: deleteRows }[phase];
  await write(source.client, 't', rows);
  const connection = await connectPostgres(source.config, {
    replication: 'database',
    applicationName: 'bench-replay',
  });
  const payloads: Buffer[] = [];
  try {
    const copy = connection.client.query(
      copyBoth(`START_REPLICATION SLOT ${slot} LOGICAL 0/0 (proto_version '1', publication_names 'p')`, {
        alignOnCopyDataFrame: true,
        readableObjectMode: true,
      }),
    );
    let changes = 0;
    for await (const chunk of copy as AsyncIterable<Buffer>) {
      const message = parseReplicationMessage(chunk);
      if (message.tag !== 'xlogData') continue;
      payloads.push(Buffer.from(chunk));
      const tag = String.fromCharCode(message.payload[message.dataStart] ?? 0);
      if (tag === 'I' || tag === 'U' || tag === 'D') changes++;
      if (tag === 'C' && changes >= rows) break;
    }
    copy.destroy();
  } finally {
    await connection.close().catch(() => {});
    await source.client.query(`SELECT pg_drop_replication_slot($1)`, [slot]);
  }
  return payloads;
}

/** Replays the payloads through decode, the applier and COPY text; returns the changes applied. */
async function replay(payloads: readonly Buffer[], table: DestinationTable): Promise<number> {
  let applied = 0;
  const destination = {
    changeBuffer: (table: DestinationTable) => new PostgresTableChanges(table, true),
    async syncBatch(batch: ChangeBatch) {
      for (const { held } of batch.tables) {
        if (!(held instanceof PostgresTableChanges)) throw new Error('changes not held as COPY text');
        const chunks = [...(held.newRows?.chunks() ?? []), ...(held.staged?.fold().chunks ?? [])];
        if (chunks.some((chunk) => chunk.length === 0)) throw new Error('empty chunk');
      }
      applied += batch.rowCount;
    },
  };
  const applier = new ChangeApplier({
    mirror: 'replay',
    // The applier calls changeBuffer and syncBatch only (and addColumns on a schema change, which a replay has none of).
    destination: destination as unknown as Destination,
    batches: { startBatch: async () => {}, finishBatch: async () => {} },
    acknowledge: () => {},
    typeNames: async () => [],
    partitionAncestors: async () => [],
    publication: { name: 'replay', createdByMirror: true },
    log: async () => {},
    tableMappings: [tableMappingSchema.parse({ source: table.source, destination: table.destination })],
    tables: [table],
    limits: { maxRows: 1_000_000, maxBytes: batchBytes },
    checkpoint: { lsn: 0n, batchId: 0n },
  });
  let events: StreamEvent[] = [];
  for (const payload of payloads) {
    const message = parseReplicationMessage(payload);
    if (message.tag !== 'xlogData') continue;
    events.push({
      tag: 'change',
      walStart: message.walStart,
      message: decodePgoutput(message.payload, message.dataStart, message.dataEnd),
    });
    if (events.length === 4096) {
      await applier.apply(events);
      events = [];
    }
  }
  await applier.apply(events);
  await applier.flush();
  return applied;
}

const source = await sourceDatabase('bench_replay');
try {
  console.log(
    `bench engine-replay: ${rows} rows a phase, ${repetitions} repetitions, batches of ${batchBytes / 1048576} MiB`,
  );
  for (const phase of phases) {
    const payloads = await record(source, phase);
    const info = await readTableInfo(source.client, { schema: 'public', table: 't' });
    if (!info) throw new Error('the table vanished');
    const mapping = tableMappingSchema.parse({
      source: { schema: 'public', table: 't' },
      destination: { schema: 'public', table: 't' },
    });
    const table = destinationTable(mapping, info);
    const figures: string[] = [];
    for (let repetition = 0; repetition < repetitions; repetition++) {
      const gcBefore = await gcSoFar();
      const cpuBefore = process.cpuUsage();
      const applied = await replay(payloads, table);
      const cpu = process.cpuUsage(cpuBefore);
      const gc = (await gcSoFar()) - gcBefore;
      if (applied !== rows) throw new Error(`${phase}: ${applied} changes applied, ${rows} expected`);
      const cpuNs = ((cpu.user + cpu.system) * 1000) / rows;
      figures.push(`${Math.round(cpuNs)} (GC ${Math.round((gc * 1e6) / rows)})`);
    }
    console.log(`${phase.padEnd(7)} ns a change: ${figures.join(', ')}`);
  }
} finally {
  await source.drop();
}

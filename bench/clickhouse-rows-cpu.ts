// The engine's CPU per row on each of the ClickHouse destination's write paths,
// against both test engines: the CPU time (user + system) of this process
// only, while the server's work is in its own process. Written against the
// destination's public face (ClickHouseDestination, Row, held batches) so the
// same file measures any commit, alternating (docs/benchmarks.md).
//
//   snapshot   writeSnapshotPartition of COPY text already in memory
//   inserts    a batch of leading inserts (rows over pgoutput TupleData)
//   updates    a batch of updates of those rows: final states, no stored rows
//
// Tables: `bench_ch` (bigint, int, numeric(12,2), text, timestamptz: the
// bench's shape) and `types_ch` (bigint, float8, date, uuid, boolean, bytea).
// Best of BENCH_REPEAT (default 2) per figure. Sizes: BENCH_ROWS (default
// 200,000). Run: node bench/clickhouse-rows-cpu.ts; prints one JSON line.
import { loadavg } from 'node:os';
import { Readable } from 'node:stream';
import type pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import { parseCopyTextLines } from '../engine/src/connectors/copy-text.ts';
import { readTableInfo } from '../engine/src/connectors/postgres/source/table-info.ts';
import type { DestinationTable, RowChange } from '../engine/src/connectors/records.ts';
import { destinationTable } from '../engine/src/pipeline/tables.ts';
import { tableMappingSchema } from '../engine/src/resources/mirror.ts';
import { clickhouseEngines } from '../test/support/clickhouse-engines.ts';
import { createTestDatabase } from '../test/support/databases.ts';
import { wireTuple } from '../test/support/wire-tuple.ts';
import { benchDestination } from './lib/clickhouse-bench.ts';

const rowCount = Number(process.env.BENCH_ROWS ?? 200_000);
const repeat = Number(process.env.BENCH_REPEAT ?? 2);
const transaction = { xid: 1, commitLsn: 1n, commitTimeMicros: 0n };

const tables = {
  bench_ch: {
    definition: `id bigint PRIMARY KEY, account int NOT NULL, amount numeric(12,2), note text, created timestamptz NOT NULL`,
    fill: `SELECT g, g % 1000, g * 0.01, 'note ' || md5(g::text), '2024-01-01'::timestamptz + g * interval '1 ms'`,
  },
  types_ch: {
    definition: `id bigint PRIMARY KEY, f float8, d date, u uuid, b boolean, r bytea`,
    fill: `SELECT g, g / 7.0, '2024-01-01'::date + (g % 3000), md5(g::text)::uuid, g % 2 = 0, decode(md5(g::text), 'hex')`,
  },
} as const;

async function copyText(client: pg.Client, table: DestinationTable): Promise<Buffer[]> {
  const names = table.columns.map((column) => `"${column.name}"`).join(', ');
  const chunks: Buffer[] = [];
  for await (const chunk of client.query(
    copyTo(`COPY (SELECT ${names} FROM ${table.source.table}) TO STDOUT`),
  ))
    chunks.push(chunk as Buffer);
  return chunks;
}

function cpuMillis(work: () => Promise<unknown>): Promise<number> {
  const before = process.cpuUsage();
  return work().then(() => {
    const used = process.cpuUsage(before);
    return (used.user + used.system) / 1000;
  });
}

async function main(): Promise<void> {
  const source = await createTestDatabase('bench_chcpu');
  const results: Record<string, Record<string, number>> = {};
  try {
    for (const setting of ['DateStyle = ISO', 'TimeZone = UTC', 'extra_float_digits = 3']) {
      await source.client.query(`SET ${setting}`);
    }
    const prepared: { table: DestinationTable; copy: Buffer[]; rows: (string | null)[][] }[] = [];
    for (const [name, { definition, fill }] of Object.entries(tables)) {
      await source.client.query(`CREATE TABLE ${name} (${definition})`);
      await source.client.query(`INSERT INTO ${name} ${fill} FROM generate_series(1, ${rowCount}) g`);
      const info = await readTableInfo(source.client, { schema: 'public', table: name });
      if (!info) throw new Error(`${name} vanished`);
      const table = destinationTable(
        tableMappingSchema.parse({
          source: { schema: 'public', table: name },
          destination: { schema: 'public', table: name },
        }),
        info,
      );
      const copy = await copyText(source.client, table);
      prepared.push({ table, copy, rows: parseCopyTextLines(Buffer.concat(copy)) });
    }
    for (const engine of clickhouseEngines) {
      const bench = await benchDestination(engine, 'bench_chcpu');
      const { destination } = bench;
      let batchId = 0n;
      try {
        await destination.check();
        await destination.setupTables(prepared.map(({ table }) => table));
        for (const { table, copy, rows } of prepared) {
          const sync = async (changes: RowChange[]) => {
            const held = destination.changeBuffer(table);
            for (const change of changes) held.add(change);
            batchId++;
            await destination.syncBatch({
              mirror: 'cpu',
              batchId,
              endLsn: batchId,
              tables: [{ table, held }],
              rowCount: changes.length,
            });
          };
          const best: Record<string, number> = {};
          const record = (name: string, millis: number) => {
            best[name] = Math.min(best[name] ?? Number.POSITIVE_INFINITY, millis);
          };
          for (let run = 0; run < repeat; run++) {
            await destination.truncateTables([table]);
            record(
              'snapshot',
              await cpuMillis(() => destination.writeSnapshotPartition(table, Readable.from(copy))),
            );
            await destination.truncateTables([table]);
            const inserts: RowChange[] = rows.map((cells) => ({
              transaction,
              kind: 'insert',
              newRow: wireTuple(cells),
            }));
            record('inserts', await cpuMillis(() => sync(inserts)));
            const updates: RowChange[] = rows.map((cells) => ({
              transaction,
              kind: 'update',
              oldKey: null,
              newRow: wireTuple(cells),
            }));
            record('updates', await cpuMillis(() => sync(updates)));
          }
          // Microseconds of CPU per row.
          results[`${engine.modern ? 'chdb' : '18.16'} ${table.source.table}`] = Object.fromEntries(
            Object.entries(best).map(([name, millis]) => [
              name,
              Math.round((millis * 1000 * 100) / rowCount) / 100,
            ]),
          );
        }
      } finally {
        await bench.close();
      }
    }
  } finally {
    await source.drop();
  }
  console.log(
    JSON.stringify({ rows: rowCount, loadAverage: loadavg().map((value) => value.toFixed(2)), results }),
  );
}

await main();

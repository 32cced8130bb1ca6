// Which insert format the ClickHouse destination should stream: RowBinary or
// JSONEachRow, measured on a 1M-row initial load of the bench table shape
// (bigint, int, numeric(12,2), text, timestamptz) from the test PostgreSQL
// server into both test ClickHouse engines.
//
//   encode   COPY text already in memory → format bytes, no I/O; RowBinary
//            through the destination's own row writer (row-writer.ts, from
//            the lines' bytes), JSONEachRow from parsed values
//   load     COPY (SELECT …) TO STDOUT → encode → one streamed INSERT,
//            checked with count(); RowBinary through the destination's own
//            writeSnapshotPartition, JSONEachRow through a parse with a
//            JSON encoder
//
// Best of BENCH_REPEAT (default 2) runs per figure, formats alternating.
// Sizes: BENCH_ROWS (default 1,000,000). Run: node bench/clickhouse-format.ts
import { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { type ClickHouseClient, createClient } from '@clickhouse/client';
import type pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import { columnEncoder } from '../engine/src/connectors/clickhouse/column-encoder.ts';
import { RowBinaryWriter } from '../engine/src/connectors/clickhouse/row-binary.ts';
import { RowWriter } from '../engine/src/connectors/clickhouse/row-writer.ts';
import { serverCapabilities } from '../engine/src/connectors/clickhouse/server.ts';
import { type ChType, parseChType, sourceColumnType } from '../engine/src/connectors/clickhouse/types.ts';
import { copyTextLineBlocks, copyTextRowBatches } from '../engine/src/connectors/copy-text.ts';
import { readTableInfo } from '../engine/src/connectors/postgres/source/table-info.ts';
import type { DestinationTable } from '../engine/src/connectors/records.ts';
import { parseTextValue, type Value } from '../engine/src/model/parse-text.ts';
import { destinationTable } from '../engine/src/pipeline/tables.ts';
import { tableMappingSchema } from '../engine/src/resources/mirror.ts';
import { clickhouseEngines } from '../test/support/clickhouse-engines.ts';
import { createTestDatabase } from '../test/support/databases.ts';
import { benchDestination } from './lib/clickhouse-bench.ts';

const rowCount = Number(process.env.BENCH_ROWS ?? 1_000_000);
const repeat = Number(process.env.BENCH_REPEAT ?? 2);
const chunkBytes = 1 << 20;

const engines = clickhouseEngines;

// --- a JSONEachRow encoder for the bench table's types -----------------------------------

function pad(value: number | bigint, width = 2): string {
  return String(value).padStart(width, '0');
}

function dateTime64Text(micros: bigint): string {
  const seconds = micros / 1_000_000n - (micros % 1_000_000n < 0n ? 1n : 0n);
  const fraction = micros - seconds * 1_000_000n;
  const date = new Date(Number(seconds) * 1000);
  return `${date.getUTCFullYear()}-${pad(date.getUTCMonth() + 1)}-${pad(date.getUTCDate())} ${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())}.${pad(fraction, 6)}`;
}

function jsonValue(type: ChType, value: Value | null): string {
  if (value === null) return 'null';
  switch (type.name) {
    case 'Nullable':
    case 'LowCardinality':
      return jsonValue(type.inner, value);
    case 'String':
      return JSON.stringify(String(value));
    case 'DateTime64':
      return `"${dateTime64Text(value as bigint)}"`;
    default:
      // Integers (Int64 micros on 18.16 too), Decimal text: written unquoted, exact.
      return String(value);
  }
}

type JsonRowEncoder = (row: readonly (string | null)[]) => string;

function jsonRowEncoder(table: DestinationTable, types: ReadonlyMap<string, ChType>): JsonRowEncoder {
  const columns = table.columns.map((column) => ({
    prefix: `${JSON.stringify(column.name)}:`,
    source: sourceColumnType(column),
    target: types.get(column.name) as ChType,
  }));
  return (row) => {
    let line = '{';
    columns.forEach((column, index) => {
      const text = row[index] ?? null;
      line += `${index > 0 ? ',' : ''}${column.prefix}${jsonValue(column.target, text === null ? null : parseTextValue(column.source, text))}`;
    });
    return `${line},"_tributary_is_deleted":0,"_tributary_version":0}\n`;
  };
}

// --- helpers ---------------------------------------------------------------------------

async function seconds<T>(work: () => Promise<T>): Promise<[number, T]> {
  const started = performance.now();
  const result = await work();
  return [(performance.now() - started) / 1000, result];
}

function copyStream(client: pg.Client): Readable {
  return client.query(copyTo(`COPY (SELECT id, account, amount, note, created FROM bench_ch) TO STDOUT`));
}

async function columnTypes(admin: ClickHouseClient, database: string): Promise<Map<string, ChType>> {
  const result = await admin.query({
    query: `SELECT name, type FROM system.columns WHERE database = '${database}' AND table = 'bench_ch'`,
    format: 'JSONEachRow',
  });
  return new Map(
    (await result.json<{ name: string; type: string }>()).map((row) => [row.name, parseChType(row.type)]),
  );
}

async function count(admin: ClickHouseClient, database: string): Promise<number> {
  const result = await admin.query({
    query: `SELECT count() AS n FROM ${database}.bench_ch`,
    format: 'JSONEachRow',
  });
  return Number((await result.json<{ n: string }>())[0]?.n);
}

async function main(): Promise<void> {
  const source = await createTestDatabase('bench_chfmt');
  const results: Record<string, unknown>[] = [];
  try {
    await source.client.query(
      `CREATE TABLE bench_ch (id bigint PRIMARY KEY, account int NOT NULL, amount numeric(12,2), note text, created timestamptz NOT NULL)`,
    );
    await source.client.query(
      `INSERT INTO bench_ch SELECT g, g % 1000, g * 0.01, 'note ' || md5(g::text), '2024-01-01'::timestamptz + g * interval '1 ms'
       FROM generate_series(1, ${rowCount}) g`,
    );
    await source.client.query(`VACUUM ANALYZE bench_ch`);
    for (const setting of ['DateStyle = ISO', 'TimeZone = UTC', 'extra_float_digits = 3']) {
      await source.client.query(`SET ${setting}`);
    }
    const info = await readTableInfo(source.client, { schema: 'public', table: 'bench_ch' });
    if (!info) throw new Error('bench_ch vanished');
    const table = destinationTable(
      tableMappingSchema.parse({
        source: { schema: 'public', table: 'bench_ch' },
        destination: { schema: 'public', table: 'bench_ch' },
      }),
      info,
    );
    // The COPY text once in memory, for the encode-only figures.
    const copyChunks: Buffer[] = [];
    for await (const chunk of copyStream(source.client)) copyChunks.push(chunk as Buffer);
    const copyBytes = copyChunks.reduce((sum, chunk) => sum + chunk.length, 0);

    for (const engine of engines) {
      const bench = await benchDestination(engine, 'bench_chfmt');
      const { database, config, admin, destination } = bench;
      try {
        const version = (await destination.check()).version;
        await destination.setupTables([table]);
        const types = await columnTypes(admin, database);
        const limits = { date32: serverCapabilities(version).extendedDateRange };

        // Encode only.
        const rowWriter = new RowWriter(
          table,
          database,
          table.columns.map((column) =>
            columnEncoder(column.name, sourceColumnType(column), types.get(column.name) as ChType, limits),
          ),
          false,
        );
        const encodeRowBinary = async () => {
          const writer = new RowBinaryWriter(chunkBytes + (chunkBytes >> 2));
          let bytes = 0;
          for await (const block of copyTextLineBlocks(Readable.from(copyChunks))) {
            rowWriter.writeLines(block, writer);
            if (writer.length >= chunkBytes) bytes += writer.take().length;
          }
          return bytes + writer.take().length;
        };
        const encodeJsonRow = jsonRowEncoder(table, types);
        const encodeJson = async () => {
          let pending: string[] = [];
          let pendingLength = 0;
          let bytes = 0;
          for await (const batch of copyTextRowBatches(Readable.from(copyChunks), table))
            for (const row of batch) {
              const line = encodeJsonRow(row);
              pending.push(line);
              pendingLength += line.length;
              if (pendingLength >= chunkBytes) {
                bytes += Buffer.from(pending.join('')).length;
                pending = [];
                pendingLength = 0;
              }
            }
          return bytes + Buffer.from(pending.join('')).length;
        };

        // Load: COPY from PostgreSQL to an INSERT.
        const loadRowBinary = async () =>
          destination.writeSnapshotPartition(table, copyStream(source.client));
        const loadJson = async () => {
          const client = createClient({
            url: `http://127.0.0.1:${config.httpPort}`,
            username: config.user,
            password: config.password,
            request_timeout: 600_000,
            clickhouse_settings: {
              send_progress_in_http_headers: 1,
              http_headers_progress_interval_ms: '10000',
            },
          });
          try {
            const rowBatches = copyTextRowBatches(copyStream(source.client), table);
            const body = Readable.from(
              (async function* () {
                let pending: string[] = [];
                let pendingLength = 0;
                for await (const batch of rowBatches)
                  for (const row of batch) {
                    const line = encodeJsonRow(row);
                    pending.push(line);
                    pendingLength += line.length;
                    if (pendingLength >= chunkBytes) {
                      yield Buffer.from(pending.join(''));
                      pending = [];
                      pendingLength = 0;
                    }
                  }
                if (pending.length > 0) yield Buffer.from(pending.join(''));
              })(),
            );
            const columns = [
              ...table.columns.map((column) => column.name),
              '_tributary_is_deleted',
              '_tributary_version',
            ];
            const result = await client.exec({
              query: `INSERT INTO ${database}.bench_ch (${columns.join(', ')}) FORMAT JSONEachRow`,
              values: body,
            });
            result.stream.resume();
            await finished(result.stream);
          } finally {
            await client.close();
          }
        };

        const best: Record<string, number> = {};
        const bytes: Record<string, number> = {};
        const record = (name: string, time: number) => {
          best[name] = Math.min(best[name] ?? Number.POSITIVE_INFINITY, time);
        };
        for (let run = 0; run < repeat; run++) {
          const [rowBinaryEncode, rowBinaryBytes] = await seconds(encodeRowBinary);
          record('encode RowBinary', rowBinaryEncode);
          bytes.RowBinary = rowBinaryBytes;
          const [jsonEncode, jsonBytes] = await seconds(encodeJson);
          record('encode JSONEachRow', jsonEncode);
          bytes.JSONEachRow = jsonBytes;
          for (const [name, load] of [
            ['load RowBinary', loadRowBinary],
            ['load JSONEachRow', loadJson],
          ] as const) {
            await destination.truncateTables([table]);
            const [time] = await seconds<unknown>(load);
            const loaded = await count(admin, database);
            if (loaded !== rowCount) throw new Error(`${name} loaded ${loaded} rows`);
            record(name, time);
          }
        }
        const figures = Object.fromEntries(
          Object.entries(best).map(([name, time]) => [
            name,
            { seconds: Number(time.toFixed(2)), rowsPerSecond: Math.round(rowCount / time) },
          ]),
        );
        results.push({
          engine: engine.name,
          version,
          rows: rowCount,
          copyTextBytes: copyBytes,
          bytes,
          figures,
        });
        console.log(JSON.stringify(results.at(-1), null, 2));
      } finally {
        await bench.close();
      }
    }
  } finally {
    await source.drop();
  }
}

await main();

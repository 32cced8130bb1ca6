// The ClickHouse destination against both test engines (clickhouse-server 18.16
// and current ClickHouse through chdb), driven directly with batches: table
// shapes per server, exact values, idempotent replays, TOAST filling from the
// destination, rows moving between sorting keys, soft delete and truncates.
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { type ClickHouseClient, ClickHouseLogLevel, createClient } from '@clickhouse/client';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { checkAnalyticsPeer } from '../../engine/src/connectors/clickhouse/check.ts';
import { ClickHouseDestination } from '../../engine/src/connectors/clickhouse/destination.ts';
import { RowWriter } from '../../engine/src/connectors/clickhouse/row-writer.ts';
import { ClickHouseTableChanges } from '../../engine/src/connectors/clickhouse/table-changes.ts';
import { ClickHouseTransport } from '../../engine/src/connectors/clickhouse/transport.ts';
import { copyTextRowBatches } from '../../engine/src/connectors/copy-text.ts';
import {
  type ChangeBatch,
  type DestinationTable,
  type RowChange,
  type RowImage,
  type SourceColumn,
  unchangedToast,
} from '../../engine/src/connectors/records.ts';
import { createSource } from '../../engine/src/connectors/registry.ts';
import { rowOfCells } from '../../engine/src/connectors/rows.ts';
import type { TableMapping } from '../../engine/src/resources/mirror.ts';
import { clickhouseEngines } from '../support/clickhouse-engines.ts';
import { createTestDatabase } from '../support/databases.ts';

const engines = clickhouseEngines;

const logger = pino({ level: process.env.TRIBUTARY_TEST_LOG ?? 'silent' });
const transaction = { xid: 1, commitLsn: 100n, commitTimeMicros: 0n };

function column(
  name: string,
  typeOid: number,
  typeName: string,
  extra: Partial<SourceColumn> = {},
): SourceColumn {
  return { name, typeOid, typeModifier: -1, typeName, notNull: false, ...extra };
}

/** numeric(p, s)'s type modifier. */
const numericModifier = (precision: number, scale: number) => ((precision << 16) | (scale & 0x7ff)) + 4;

function table(name: string, columns: SourceColumn[], keyColumns = ['id']): DestinationTable {
  return {
    source: { schema: 'public', table: name },
    destination: { schema: 'public', table: name },
    columns,
    keyColumns,
  };
}

/** A batch of `changes`, held as the destination holds them (ClickHouseDestination.changeBuffer). */
function batch(
  mirror: string,
  batchId: bigint,
  target: DestinationTable,
  changes: RowChange[],
): ChangeBatch<ClickHouseTableChanges> {
  const held = new ClickHouseTableChanges(target);
  for (const change of changes) held.add(change);
  return {
    mirror,
    batchId,
    endLsn: batchId * 1000n,
    tables: [{ table: target, held }],
    rowCount: changes.length,
  };
}

/** The same, through the destination's own changeBuffer, as the pipeline hands a batch over. */
function heldBatch(
  destination: ClickHouseDestination,
  mirror: string,
  batchId: bigint,
  target: DestinationTable,
  changes: RowChange[],
): ChangeBatch<ClickHouseTableChanges> {
  const held = destination.changeBuffer(target);
  for (const change of changes) held.add(change);
  return {
    mirror,
    batchId,
    endLsn: batchId * 1000n,
    tables: [{ table: target, held }],
    rowCount: changes.length,
  };
}

const insert = (...newRow: (string | null)[]): RowChange => ({
  transaction,
  kind: 'insert',
  newRow: rowOfCells(newRow),
});
const update = (newRow: RowImage, oldKey: RowImage | null = null): RowChange => ({
  transaction,
  kind: 'update',
  oldKey: oldKey && rowOfCells(oldKey),
  newRow: rowOfCells(newRow),
});
const remove = (...oldKey: (string | null)[]): RowChange => ({
  transaction,
  kind: 'delete',
  oldKey: rowOfCells(oldKey),
});

/** COPY text of rows: tab-separated, \N for null, backslash escapes. */
function copyText(rows: (string | null)[][]): Readable {
  const escapeCopy = (value: string) =>
    value.replace(
      /[\\\n\r\t]/g,
      (char) => ({ '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' })[char] ?? char,
    );
  return Readable.from([
    `${rows.map((row) => row.map((cell) => (cell === null ? '\\N' : escapeCopy(cell))).join('\t')).join('\n')}\n`,
  ]);
}

describe.each(engines)('ClickHouse destination on $name', (engine) => {
  const database = `tributary_it_${randomBytes(4).toString('hex')}`;
  let admin: ClickHouseClient;

  const newDestination = (
    options: { softDeleteColumn?: string; syncedAtColumn?: string; mappings?: TableMapping[] } = {},
  ) =>
    new ClickHouseDestination(engine.config(database), {
      mirror: 'm',
      mirrorColumns: { softDeleteColumn: options.softDeleteColumn, syncedAtColumn: options.syncedAtColumn },
      tableMappings: options.mappings ?? [],
      maxBatchSize: 1_000_000,
      logger,
    });

  /** Visible rows under FINAL (18.16 has no is_deleted engine parameter: readers filter). */
  async function rows(name: string, select: string, order = 'id'): Promise<Record<string, unknown>[]> {
    const result = await admin.query({
      query: `SELECT ${select} FROM ${database}.${name} FINAL WHERE _tributary_is_deleted = 0 ORDER BY ${order}`,
      format: 'JSONEachRow',
    });
    return result.json();
  }

  beforeAll(async () => {
    const config = engine.config('default');
    admin = createClient({
      url: `http://127.0.0.1:${config.httpPort}`,
      username: config.user,
      password: config.password,
      request_timeout: 60_000,
      log: { level: ClickHouseLogLevel.OFF },
    });
    await admin.command({ query: `CREATE DATABASE ${database}` });
  });

  afterAll(async () => {
    await admin?.command({ query: `DROP DATABASE IF EXISTS ${database}` });
    await admin?.close();
  });

  it('checks the server, and creates tables of the best shape the server supports', async () => {
    const destination = newDestination();
    try {
      expect((await destination.check()).version).toMatch(engine.modern ? /^2\d\./ : /^18\./);
      // The peer check proves CREATE TABLE and INSERT with a scratch table, and leaves nothing behind.
      expect((await checkAnalyticsPeer(engine.config(database), 10_000)).version).toMatch(/^\d+\./);
      const scratch = await admin.query({
        query: `SELECT name FROM system.tables WHERE database = '${database}' AND name LIKE '_tributary_check_%'`,
        format: 'JSONEachRow',
      });
      expect(await scratch.json()).toEqual([]);
      const shapes = table('shapes', [
        column('id', 23, 'integer', { notNull: true }),
        column('n', 1700, 'numeric(12,2)', { typeModifier: numericModifier(12, 2) }),
        column('wide', 1700, 'numeric(50,5)', { typeModifier: numericModifier(50, 5) }),
        column('free', 1700, 'numeric'),
        column('ts', 1184, 'timestamp with time zone'),
        column('d', 1082, 'date'),
        column('flag', 16, 'boolean', { notNull: true }),
        column('tags', 1009, 'text[]'),
        column('grid', 1007, 'integer[]', { arrayDimensions: 2 }),
        column('attrs', 99_999, 'hstore'),
        column('doc', 3802, 'jsonb'),
        column('dom', 99_998, 'positive_int', { domainBaseTypeName: 'integer' }),
      ]);
      await destination.setupTables([shapes]);
      await destination.setupTables([shapes]);
      const types = await admin.query({
        query: `SELECT name, type FROM system.columns WHERE database = '${database}' AND table = 'shapes'`,
        format: 'JSONEachRow',
      });
      const byName = Object.fromEntries(
        (await types.json<{ name: string; type: string }>()).map((row) => [row.name, row.type]),
      );
      expect(byName).toEqual({
        id: 'Int32',
        n: 'Nullable(Decimal(12, 2))',
        wide: engine.modern ? 'Nullable(Decimal(50, 5))' : 'Nullable(String)',
        free: 'Nullable(String)',
        ts: engine.modern ? "Nullable(DateTime64(6, 'UTC'))" : 'Nullable(Int64)',
        d: engine.modern ? 'Nullable(Date32)' : 'Nullable(Date)',
        flag: engine.modern ? 'Bool' : 'UInt8',
        tags: 'Array(Nullable(String))',
        grid: 'Array(Array(Nullable(Int32)))',
        attrs: engine.modern ? 'Map(String, Nullable(String))' : 'Nullable(String)',
        doc: 'Nullable(String)',
        dom: 'Nullable(Int32)',
        _tributary_synced_at: engine.modern ? "DateTime64(6, 'UTC')" : "DateTime('UTC')",
        _tributary_is_deleted: 'UInt8',
        _tributary_version: 'UInt64',
      });
      const engineFull = await admin.query({
        query: `SELECT engine_full FROM system.tables WHERE database = '${database}' AND name = 'shapes'`,
        format: 'JSONEachRow',
      });
      const [{ engine_full: engineText = '' } = {}] = await engineFull.json<{ engine_full: string }>();
      expect(engineText).toContain(
        engine.modern
          ? 'ReplacingMergeTree(_tributary_version, _tributary_is_deleted)'
          : 'ReplacingMergeTree(_tributary_version)',
      );
      expect(engineText).toMatch(/ORDER BY \(?id\)?/);
    } finally {
      await destination.close();
    }
  });

  it('writes snapshot rows and batches exactly, and a replayed batch changes nothing', async () => {
    const destination = newDestination();
    // Not named `values`: the chdb front takes an INSERT naming VALUES for one with inline data.
    const values = table('typed', [
      column('id', 20, 'bigint', { notNull: true }),
      column('amount', 1700, 'numeric(12,2)', { typeModifier: numericModifier(12, 2) }),
      column('name', 25, 'text'),
      column('raw', 17, 'bytea'),
      column('u', 2950, 'uuid'),
      column('ts', 1184, 'timestamp with time zone'),
      column('d', 1082, 'date'),
      column('f8', 701, 'double precision'),
      column('ia', 1007, 'integer[]'),
    ]);
    try {
      await destination.setupTables([values]);
      const loaded = await destination.writeSnapshotPartition(
        values,
        copyText([
          [
            '1',
            '-12.50',
            "it's \\ a\ttab",
            '\\xdeadbeef00ff',
            'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11',
            '2024-02-29 23:59:59.123456+00',
            '2024-02-29',
            '-0',
            '{1,NULL,3}',
          ],
          ['9223372036854775807', null, 'é ünïcode', '\\x', null, 'infinity', '1969-12-31', 'NaN', '{}'],
        ]),
      );
      expect(loaded).toBe(2);
      const mirror = `typed-${randomBytes(3).toString('hex')}`;
      const first = batch(mirror, 1n, values, [
        insert('2', '3.00', 'two', null, null, '1999-12-31 23:59:59.5+02', '2000-01-01', '1.5', '{7}'),
        update(['1', '99.99', 'one', '\\x01', null, null, null, null, '{}']),
        insert('3', '1.00', 'gone', null, null, null, null, null, '{}'),
        remove('3', null, null, null, null, null, null, null, null),
      ]);
      await destination.syncBatch(first);
      expect(await destination.readCheckpoint(mirror)).toEqual({ batchId: 1n, lsn: 1000n });
      const select = engine.modern
        ? 'toString(id) AS id, toString(amount) AS amount, name, hex(raw) AS raw, toString(u) AS u, toString(toUnixTimestamp64Micro(ts)) AS ts, toString(d) AS d, toString(f8) AS f8, ia'
        : 'toString(id) AS id, toString(amount) AS amount, name, hex(raw) AS raw, toString(u) AS u, toString(ts) AS ts, toString(d) AS d, toString(f8) AS f8, ia';
      const expected = [
        {
          id: '1',
          amount: engine.modern ? '99.99' : '99.99',
          name: 'one',
          raw: '01',
          u: null,
          ts: null,
          d: null,
          f8: null,
          ia: [],
        },
        {
          id: '2',
          amount: engine.modern ? '3' : '3.00',
          name: 'two',
          raw: null,
          u: null,
          ts: '946677599500000',
          d: '2000-01-01',
          f8: '1.5',
          ia: [7],
        },
        {
          id: '9223372036854775807',
          amount: null,
          name: 'é ünïcode',
          raw: '',
          u: null,
          // infinity is clamped to DateTime64's range; Int64 micros keep the sentinel.
          ts: engine.modern ? '10413791999999999' : '9223372036854775807',
          // 1969-12-31 is before Date's first day on 18.16, which shows day 0 as 0000-00-00.
          d: engine.modern ? '1969-12-31' : '0000-00-00',
          f8: 'nan',
          ia: [],
        },
      ];
      const before = await rows('typed', select, 'toInt64(id)');
      expect(before).toEqual(expected);
      // The same batch again (a replay after a crash before the checkpoint was read) is skipped...
      await destination.syncBatch(first);
      expect(await rows('typed', select, 'toInt64(id)')).toEqual(expected);
      // ...and a batch re-applied under a new id (its rows written twice) converges too.
      await destination.syncBatch({ ...first, batchId: 2n });
      expect(await rows('typed', select, 'toInt64(id)')).toEqual(expected);
      await destination.removeCheckpoint(mirror);
      expect(await destination.readCheckpoint(mirror)).toBeUndefined();
    } finally {
      await destination.close();
    }
  });

  it("loads PostgreSQL's real output from COPY and from TupleData into the same values as the final states' way", async () => {
    // Every column has a reader of its bytes (column-encoder.ts); the nn_ columns
    // are declared NOT NULL here but hold NULLs at the source: the type's zero.
    const pgColumns = `id bigint PRIMARY KEY, i2 smallint, i4 int, amount numeric(12,2), note text,
      doc json, u uuid, ts timestamptz, lt timestamp, nn_note text, nn_amount numeric(12,2), nn_ts timestamptz,
      flag boolean, nn_flag boolean, raw bytea, nn_raw bytea, f8 float8, nn_f8 float8, d date, nn_d date`;
    const columns = [
      column('id', 20, 'bigint', { notNull: true }),
      column('i2', 21, 'smallint'),
      column('i4', 23, 'integer'),
      column('amount', 1700, 'numeric(12,2)', { typeModifier: numericModifier(12, 2) }),
      column('note', 25, 'text'),
      column('doc', 114, 'json'),
      column('u', 2950, 'uuid'),
      column('ts', 1184, 'timestamp with time zone'),
      column('lt', 1114, 'timestamp without time zone'),
      column('nn_note', 25, 'text', { notNull: true }),
      column('nn_amount', 1700, 'numeric(12,2)', { typeModifier: numericModifier(12, 2), notNull: true }),
      column('nn_ts', 1184, 'timestamp with time zone', { notNull: true }),
      column('flag', 16, 'boolean'),
      column('nn_flag', 16, 'boolean', { notNull: true }),
      column('raw', 17, 'bytea'),
      column('nn_raw', 17, 'bytea', { notNull: true }),
      // Floats and dates: Float64 and Date32 from 22.8, Float64 and Date on 18.16.
      column('f8', 701, 'double precision'),
      column('nn_f8', 701, 'double precision', { notNull: true }),
      column('d', 1082, 'date'),
      column('nn_d', 1082, 'date', { notNull: true }),
    ];
    // Every escape COPY writes, and a backslash before N that is not NULL.
    const note = 'tab\there\nnew\\back\rcr\bbs\ffeed\vvt é 日本 \\N';
    const doc = '{"a": "x\\ty"}';
    const source = await createTestDatabase('chtsv');
    const reader = createSource({ kind: 'relational', config: source.config }, { mirror: 'tsv' });
    // via_tsv: the snapshot's COPY text; via_tuples: a batch's new rows, held
    // as the TupleData pgoutput sends; via_rowbinary: the same batch into a
    // table sorted by a non-key column, whose new rows take the final states' way.
    const viaTsv = table('via_tsv', columns);
    const viaTuples = table('via_tuples', columns);
    const viaRowBinary = table('via_rowbinary', columns);
    const destination = newDestination({
      mappings: [
        {
          source: viaRowBinary.source,
          destination: viaRowBinary.destination,
          exclude: [],
          columns: [{ sourceName: 'nn_note', ordering: 1 }],
        },
      ],
    });
    const lines = vi.spyOn(RowWriter.prototype, 'writeLines');
    const tuples = vi.spyOn(RowWriter.prototype, 'writeTuples');
    try {
      await source.client.query(`CREATE TABLE items (${pgColumns})`);
      await source.client.query(
        `INSERT INTO items VALUES
        (1, 1, 1, 12.30, $1, $2,
         'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '2024-02-29 23:59:59.123456+00', '2024-02-29 23:59:59.5',
         'x', 1.5, '2024-01-01 00:00:00+00', true, false,
         (SELECT string_agg(set_byte('\\x00'::bytea, 0, g), '' ORDER BY g) FROM generate_series(0, 255) g), '\\x',
         1.5, 0.1, '2024-02-29', '1901-01-01'),
        (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
        (3, -32768, 2147483647, 'NaN', '', '[]', NULL, 'infinity', '-infinity', '', 0, 'infinity', false, true, '\\x5c4e', '\\x09',
         'NaN', '-Infinity', 'infinity', '-infinity'),
        (4, 32767, -2147483648, -9999999999.99, 'N', 'null', NULL, '1800-01-01 00:00:00+00',
         '0044-03-15 12:00:00 BC', NULL, -0.01, '1969-12-31 23:59:59.999999+00', true, NULL, '\\x', NULL,
         '-0', 3.4e38, '1899-12-31', '0044-03-15 BC'),
        (5, 0, 0, 0.5, 'x', '{}', NULL, '2300-06-01 12:00:00.000001+00', '1969-12-31 23:59:59.999999',
         NULL, NULL, '1901-01-01 00:00:00+00', NULL, true, NULL, '\\x0a',
         4.9e-324, 1e-45, '2300-01-01', NULL),
        (9223372036854775807, 0, 0, 0, 'last', '1', NULL, '2255-06-01 00:00:00+00', '2299-12-31 23:59:59.999999',
         'y', 2, '-infinity', false, false, 'x', 'y',
         1.7976931348623157e308, 123.456, '2298-12-31', '1969-12-31')`,
        [note, doc],
      );
      await destination.setupTables([viaTsv, viaTuples, viaRowBinary]);
      const snapshot = await reader.openSnapshotReader(null);
      const copyRows: (string | null)[][] = [];
      try {
        const whole = { fromPage: 0, toPage: null };
        const names = columns.map((each) => each.name);
        const items = { schema: 'public', table: 'items' };
        expect(
          await snapshot.copyPartition(items, names, whole, (copy) =>
            destination.writeSnapshotPartition(viaTsv, copy),
          ),
        ).toBe(6);
        await snapshot.copyPartition(items, names, whole, async (copy) => {
          for await (const batchRows of copyTextRowBatches(copy, viaRowBinary)) copyRows.push(...batchRows);
          return copyRows.length;
        });
      } finally {
        await snapshot.close();
      }
      expect(lines).toHaveBeenCalled();
      // The same rows as a change batch's inserts, into each of the other tables.
      for (const target of [viaTuples, viaRowBinary]) {
        await destination.syncBatch(
          batch(
            `tsv-${randomBytes(3).toString('hex')}`,
            1n,
            target,
            copyRows.map((row) => insert(...row)),
          ),
        );
        expect(tuples).toHaveBeenCalledTimes(1);
      }
      const select = columns
        .map((each) =>
          ['note', 'doc', 'raw', 'nn_raw'].includes(each.name)
            ? `hex(${each.name})`
            : `toString(${each.name})`,
        )
        .map((expression, index) => `${expression} AS c${index}`)
        .join(', ');
      const loaded = await rows('via_tsv', select, 'id');
      expect(await rows('via_tuples', select, 'id')).toEqual(loaded);
      expect(await rows('via_rowbinary', select, 'id')).toEqual(loaded);
      // And what the values are, so that both formats cannot be wrong alike.
      const first = loaded[0] as Record<string, string>;
      expect(Buffer.from(first.c4 ?? '', 'hex').toString()).toBe(note);
      expect(Buffer.from(first.c5 ?? '', 'hex').toString()).toBe(doc);
      expect(first.c3).toBe(engine.modern ? '12.3' : '12.30');
      expect(first.c7).toBe(engine.modern ? '2024-02-29 23:59:59.123456' : '1709251199123456');
      const second = loaded[1] as Record<string, string | null>;
      expect([second.c1, second.c4, second.c9, second.c10]).toEqual([
        null,
        null,
        '',
        engine.modern ? '0' : '0.00',
      ]);
      expect((loaded[2] as Record<string, string | null>).c3).toBeNull();
      expect([first.c12, first.c13, second.c12, second.c13]).toEqual(
        engine.modern ? ['true', 'false', null, 'false'] : ['1', '0', null, '0'],
      );
      // A first row whose values are the column names is data too (26.7 takes such a row of a
      // text insert for a header; a RowBinary insert has none).
      await source.client.query(`CREATE TABLE header_like (id text PRIMARY KEY, note text)`);
      await source.client.query(`INSERT INTO header_like VALUES ('id', 'note'), ('a', 'b')`);
      const headerLike = table('header_like', [
        column('id', 25, 'text', { notNull: true }),
        column('note', 25, 'text'),
      ]);
      await destination.setupTables([headerLike]);
      const again = await reader.openSnapshotReader(null);
      try {
        await again.copyPartition(
          { schema: 'public', table: 'header_like' },
          ['id', 'note'],
          { fromPage: 0, toPage: null },
          (copy) => destination.writeSnapshotPartition(headerLike, copy),
        );
      } finally {
        await again.close();
      }
      expect(await rows('header_like', 'id, note')).toEqual([
        { id: 'a', note: 'b' },
        { id: 'id', note: 'note' },
      ]);
      // Every byte value, and a backslash before N that is bytes, not NULL.
      const allBytes = Buffer.from(Array.from({ length: 256 }, (_, byte) => byte))
        .toString('hex')
        .toUpperCase();
      expect([first.c14, first.c15, second.c14, second.c15]).toEqual([allBytes, '', null, '']);
      expect((loaded[2] as Record<string, string | null>).c14).toBe('5C4E');
      if (engine.modern) {
        expect([first.c16, first.c17, first.c18, first.c19]).toEqual([
          '1.5',
          '0.1',
          '2024-02-29',
          '1901-01-01',
        ]);
        expect([second.c17, second.c19]).toEqual(['0', '1970-01-01']);
        const fourth = loaded[3] as Record<string, string | null>;
        // -0 kept; dates out of Date32's range clamped, as RowBinary clamps them.
        expect([fourth.c16, fourth.c18, fourth.c19]).toEqual(['-0', '1900-01-01', '1900-01-01']);
      }
    } finally {
      lines.mockRestore();
      tuples.mockRestore();
      await reader.close();
      await destination.close();
      await source.drop();
    }
  });

  it('fills unchanged TOAST values from the stored row, in one lookup, and keeps rows on their sorting key', async () => {
    const mappings: TableMapping[] = [
      {
        source: { schema: 'public', table: 'docs' },
        destination: { schema: 'public', table: 'docs' },
        exclude: [],
        columns: [{ sourceName: 'category', ordering: 1 }],
      },
    ];
    const destination = newDestination({ mappings });
    const docs = table('docs', [
      column('id', 23, 'integer', { notNull: true }),
      column('category', 25, 'text'),
      column('title', 25, 'text'),
      column('body', 25, 'text'),
    ]);
    const mirror = `docs-${randomBytes(3).toString('hex')}`;
    try {
      await destination.setupTables([docs]);
      const big = 'x'.repeat(50_000);
      await destination.syncBatch(
        batch(mirror, 1n, docs, [
          insert('1', 'a', 'first', big),
          insert('2', 'a', 'second', `${big}2`),
          insert('3', null, 'third', 'b3'),
        ]),
      );
      await destination.syncBatch(
        batch(mirror, 2n, docs, [
          update(['1', 'a', 'renamed', unchangedToast]),
          // A new sorting key: the row at the old one must disappear.
          update(['2', 'b', 'moved', unchangedToast]),
          remove('3', null, null, null),
          // Missing at the destination: written with the value null.
          update(['4', 'c', 'orphan', unchangedToast]),
        ]),
      );
      const current = await rows(
        'docs',
        "id, category, title, toString(length(body)) AS size, replaceAll(body, 'x', '') AS rest",
      );
      expect(current).toEqual([
        { id: 1, category: 'a', title: 'renamed', size: '50000', rest: '' },
        { id: 2, category: 'b', title: 'moved', size: '50001', rest: '2' },
        { id: 4, category: 'c', title: 'orphan', size: null, rest: null },
      ]);
      const all = await admin.query({
        query: `SELECT toString(count()) AS n FROM ${database}.docs FINAL WHERE _tributary_is_deleted = 0 AND id = 2`,
        format: 'JSONEachRow',
      });
      expect(await all.json()).toEqual([{ n: '1' }]);
    } finally {
      await destination.close();
    }
  });

  it("writes a batch's leading inserts from their TupleData, at the versions their final states would have", async () => {
    // The same changes into two tables of the same columns: `held_fast` gets
    // its new rows written from their TupleData; `held_slow` has a non-key
    // sorting column, so its new rows take the final states' way (their
    // stored rows are looked up).
    const columns = [
      column('id', 23, 'integer', { notNull: true }),
      column('category', 25, 'text'),
      column('note', 25, 'text'),
      column('amount', 1700, 'numeric(12,2)', { typeModifier: numericModifier(12, 2) }),
      column('at', 1184, 'timestamp with time zone'),
    ];
    const fast = table('held_fast', columns);
    const slow = table('held_slow', columns);
    const mappings: TableMapping[] = [
      {
        source: slow.source,
        destination: slow.destination,
        exclude: [],
        columns: [{ sourceName: 'category', ordering: 1 }],
      },
    ];
    const long = `${'y'.repeat(20_000)}z`;
    const changes = [
      insert('1', 'a', 'tab\there\nnew line \\ back é', '12.50', '2024-02-29 23:59:59.123456+00'),
      insert('2', 'a', long, '-0.01', null),
      insert('3', null, null, null, '1999-12-31 23:59:59.5+02'),
      // After the new rows: the TOASTed note comes from the row just inserted.
      update(['2', 'b', unchangedToast, '7.00', null]),
      remove('3', null, null, null, null),
      insert('4', 'c', '', '1000.5', '2024-01-01 00:00:00+00'),
    ];
    const destination = newDestination({ mappings });
    const inserted = vi.spyOn(ClickHouseTransport.prototype, 'insert');
    try {
      await destination.setupTables([fast, slow]);
      await destination.syncBatch(
        heldBatch(destination, `fast-${randomBytes(3).toString('hex')}`, 1n, fast, changes),
      );
      await destination.syncBatch(
        heldBatch(destination, `slow-${randomBytes(3).toString('hex')}`, 1n, slow, changes),
      );
      const formats = inserted.mock.calls.map(
        ([sql]) => `${/held_\w+/.exec(sql)?.[0]} ${/FORMAT \w+/.exec(sql)?.[0]}`,
      );
      expect(formats).toEqual([
        'held_fast FORMAT RowBinary',
        'held_fast FORMAT RowBinary',
        'held_slow FORMAT RowBinary',
      ]);
      const select =
        "id, category, toString(length(note)) AS size, replaceAll(note, 'y', '') AS tail, toString(amount) AS amount, toString(at) AS at, toString(_tributary_version) AS version";
      const base = 1n << 27n;
      const expected = await rows('held_slow', select);
      expect(expected.map((row) => [row.id, row.version])).toEqual([
        [1, String(base)],
        [2, String(base + 3n)],
        [4, String(base + 5n)],
      ]);
      expect(expected[1]).toMatchObject({ category: 'b', tail: 'z', size: String(long.length) });
      expect(await rows('held_fast', select)).toEqual(expected);
    } finally {
      inserted.mockRestore();
      await destination.close();
    }
  });

  it("drops a batch's new rows before a truncate, even with soft delete, and refuses another destination's buffer", async () => {
    const destination = newDestination({ softDeleteColumn: '_deleted' });
    const notes = table('held_truncated', [
      column('id', 23, 'integer', { notNull: true }),
      column('v', 25, 'text'),
    ]);
    const mirror = `truncated-${randomBytes(3).toString('hex')}`;
    try {
      await destination.setupTables([notes]);
      await destination.syncBatch(heldBatch(destination, mirror, 1n, notes, [insert('1', 'kept')]));
      await destination.syncBatch(
        heldBatch(destination, mirror, 2n, notes, [
          insert('2', 'gone'),
          { transaction, kind: 'truncate' },
          insert('3', 'new'),
        ]),
      );
      const flag = engine.modern ? 'toUInt8(_deleted)' : '_deleted';
      expect(await rows('held_truncated', `id, v, ${flag} AS deleted`)).toEqual([
        { id: 1, v: 'kept', deleted: 1 },
        { id: 3, v: 'new', deleted: 0 },
      ]);
    } finally {
      await destination.close();
    }
  });

  it('looks up the stored rows of many keys in one long query', async () => {
    const destination = newDestination();
    const wide = table('wide', [
      column('id', 25, 'text', { notNull: true }),
      column('a', 25, 'text'),
      column('b', 25, 'text'),
    ]);
    const mirror = `wide-${randomBytes(3).toString('hex')}`;
    const ids = Array.from({ length: 8000 }, (_, index) => `key ${index} ${'k'.repeat(40)}`);
    try {
      await destination.setupTables([wide]);
      await destination.syncBatch(
        batch(
          mirror,
          1n,
          wide,
          ids.map((id) => insert(id, `a ${id}`, `b ${id}`)),
        ),
      );
      await destination.syncBatch(
        batch(
          mirror,
          2n,
          wide,
          ids.map((id) => update([id, 'changed', unchangedToast])),
        ),
      );
      const result = await admin.query({
        query: `SELECT toString(count()) AS n, toString(countIf(a = 'changed' AND b = concat('b ', id))) AS kept
                FROM ${database}.wide FINAL WHERE _tributary_is_deleted = 0`,
        format: 'JSONEachRow',
      });
      expect(await result.json()).toEqual([{ n: '8000', kept: '8000' }]);
    } finally {
      await destination.close();
    }
  });

  it('soft-deletes with the row values kept, flags every row on truncate, and adds columns', async () => {
    const destination = newDestination({ softDeleteColumn: '_deleted', syncedAtColumn: '_synced' });
    const people = table('people', [
      column('id', 23, 'integer', { notNull: true }),
      column('name', 25, 'text'),
    ]);
    const mirror = `soft-${randomBytes(3).toString('hex')}`;
    try {
      await destination.setupTables([people]);
      await destination.syncBatch(
        batch(mirror, 1n, people, [insert('1', 'ann'), insert('2', 'bob'), insert('3', 'cy')]),
      );
      await destination.syncBatch(batch(mirror, 2n, people, [remove('2', null), update(['3', 'cyd'])]));
      const flag = engine.modern ? 'toUInt8(_deleted)' : '_deleted';
      expect(await rows('people', `id, name, ${flag} AS deleted`)).toEqual([
        { id: 1, name: 'ann', deleted: 0 },
        { id: 2, name: 'bob', deleted: 1 },
        { id: 3, name: 'cyd', deleted: 0 },
      ]);
      await destination.syncBatch(
        batch(mirror, 3n, people, [
          { transaction, kind: 'truncate' },
          insert('4', 'dee'),
          insert('1', 'ann again'),
        ]),
      );
      expect(await rows('people', `id, name, ${flag} AS deleted`)).toEqual([
        { id: 1, name: 'ann again', deleted: 0 },
        { id: 2, name: 'bob', deleted: 1 },
        { id: 3, name: 'cyd', deleted: 1 },
        { id: 4, name: 'dee', deleted: 0 },
      ]);
      const grown = { ...people, columns: [...people.columns, column('age', 21, 'smallint')] };
      const adding = {
        before: people,
        after: grown,
        changes: [{ kind: 'add', column: column('age', 21, 'smallint') }] as const,
      };
      // Twice: an alteration made again (after a crash) changes nothing.
      await destination.alterColumns(adding);
      await destination.alterColumns(adding);
      await destination.syncBatch(batch(mirror, 4n, grown, [insert('5', 'eve', '42')]));
      expect(await rows('people', `id, age`, 'id')).toEqual([
        { id: 1, age: null },
        { id: 2, age: null },
        { id: 3, age: null },
        { id: 4, age: null },
        { id: 5, age: 42 },
      ]);
    } finally {
      await destination.close();
    }
  });

  it('hard-deletes and truncates without soft delete', async () => {
    const destination = newDestination();
    const items = table('items', [column('id', 23, 'integer', { notNull: true }), column('v', 25, 'text')]);
    const mirror = `hard-${randomBytes(3).toString('hex')}`;
    try {
      await destination.setupTables([items]);
      await destination.syncBatch(batch(mirror, 1n, items, [insert('1', 'a'), insert('2', 'b')]));
      await destination.syncBatch(
        batch(mirror, 2n, items, [remove('1', null), update(['3', 'c'], ['2', null])]),
      );
      expect(await rows('items', 'id, v')).toEqual([{ id: 3, v: 'c' }]);
      await destination.syncBatch(
        batch(mirror, 3n, items, [insert('4', 'd'), { transaction, kind: 'truncate' }, insert('5', 'e')]),
      );
      expect(await rows('items', 'id, v')).toEqual([{ id: 5, v: 'e' }]);
      expect(await destination.readCheckpoint(mirror)).toEqual({ batchId: 3n, lsn: 3000n });
      // Dropped and created again: batch ids start over, and still win over the rows already there.
      await destination.removeCheckpoint(mirror);
      expect(await destination.readCheckpoint(mirror)).toBeUndefined();
      await destination.syncBatch(batch(mirror, 1n, items, [update(['5', 'e again'])]));
      expect(await rows('items', 'id, v')).toEqual([{ id: 5, v: 'e again' }]);
      expect(await destination.readCheckpoint(mirror)).toEqual({ batchId: 1n, lsn: 1000n });
    } finally {
      await destination.close();
    }
  });
});

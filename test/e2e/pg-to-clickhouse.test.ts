// PostgreSQL to ClickHouse end to end, on both ClickHouse engines of the test
// environment: clickhouse-server 18.16 (the fallbacks) and current ClickHouse
// through chdb. Destination tables are read with FINAL; on 18.16, whose
// ReplacingMergeTree has no is_deleted parameter, readers add
// `WHERE _tributary_is_deleted = 0`, and these tests read that way everywhere.
import { randomBytes } from 'node:crypto';
import { type ClickHouseClient, ClickHouseLogLevel, createClient } from '@clickhouse/client';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClickHouseDestination } from '../../engine/src/connectors/clickhouse/destination.ts';
import { createSource } from '../../engine/src/connectors/registry.ts';
import { parseTextValue } from '../../engine/src/model/parse-text.ts';
import type { ColumnType } from '../../engine/src/model/value-kind.ts';
import { teardownMirror } from '../../engine/src/pipeline/run-mirror.ts';
import { mirrorSpecSchema } from '../../engine/src/resources/mirror.ts';
import type { Peer } from '../../engine/src/resources/peer.ts';
import { type ClickHouseEngine, clickhouseEngines } from '../support/clickhouse-engines.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import { exited, startEngine, writeEngineConfig } from '../support/engine-process.ts';
import { startLedgerWriter } from '../support/ledger-writer.ts';
import {
  createHarness,
  type Harness,
  mapping,
  type RunningMirror,
  type SpecInput,
  startMirror,
} from '../support/mirror-harness.ts';

const engines = clickhouseEngines;

const logger = pino({ level: process.env.TRIBUTARY_TEST_LOG ?? 'silent' });

/** One compared column: its text at the source, its value at the destination, both normalised. */
interface Check {
  readonly pg: string;
  readonly ch: string;
  readonly fromPg?: (text: string | null) => unknown;
  readonly fromCh?: (value: unknown) => unknown;
}

/** A column compared as text: the type's output function at the source (inet's differs from ::text). */
const plain = (name: string): Check => ({
  pg: `CASE WHEN ${name} IS NULL THEN NULL ELSE format('%s', ${name}) END`,
  ch: `toString(${name})`,
});

/** Decimal text without trailing fraction zeros: newer servers print 1.5 for Decimal(12,2) 1.50. */
function trimDecimal(value: unknown): unknown {
  if (typeof value !== 'string' || !value.includes('.')) return value;
  return value.replace(/0+$/, '').replace(/\.$/, '');
}

const decimal = (name: string): Check => ({
  pg: `${name}::text`,
  ch: `toString(${name})`,
  fromPg: trimDecimal,
  fromCh: trimDecimal,
});

/** Float text: PostgreSQL writes NaN and Infinity, ClickHouse nan and inf. */
function floatText(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  return { NaN: 'nan', Infinity: 'inf', '-Infinity': '-inf' }[value] ?? value;
}

/** An array or hstore: ClickHouse has no NULL Array or Map, so NULL arrives as empty. */
function structured(type: ColumnType, empty: unknown): (text: string | null) => unknown {
  return (text) => {
    if (text === null) return JSON.stringify(empty);
    const value = parseTextValue(type, text);
    return JSON.stringify(
      type.kind === 'hstore' ? sortedEntries(value as Record<string, string | null>) : value,
    );
  };
}

function sortedEntries(map: Record<string, unknown>): [string, unknown][] {
  return Object.entries(map).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

const microsMin = -2_208_988_800_000_000n; // 1900-01-01 00:00:00
const microsMax = 10_413_791_999_999_999n; // 2299-12-31 23:59:59.999999

/** A timestamp column: DateTime64(6) (clamped to 1900–2299) or, on 18.16, Int64 microseconds (exact). */
function timestamp(name: string, engine: ClickHouseEngine): Check {
  return {
    pg: `CASE WHEN ${name} = 'infinity' THEN '${2n ** 63n - 1n}' WHEN ${name} = '-infinity' THEN '${-(2n ** 63n)}'
          ELSE (extract(epoch FROM ${name}) * 1000000)::bigint::text END`,
    ch: engine.modern ? `toString(toUnixTimestamp64Micro(${name}))` : `toString(${name})`,
    fromPg: (text) => {
      if (text === null || !engine.modern) return text;
      const micros = BigInt(text);
      return String(micros < microsMin ? microsMin : micros > microsMax ? microsMax : micros);
    },
  };
}

/** A date column: Date32 (clamped to 1900–2299) or, on 18.16, Date (from 1970; day 0 shows as 0000-00-00). */
function date(name: string, engine: ClickHouseEngine): Check {
  return {
    pg: `${name}::text`,
    ch: `toString(${name})`,
    fromPg: (text) => {
      if (text === null) return null;
      const bc = text.endsWith(' BC');
      if (engine.modern) return bc || text < '1900-01-01' ? '1900-01-01' : text;
      return bc || text <= '1970-01-01' ? '0000-00-00' : text;
    },
  };
}

function normalise(value: unknown): unknown {
  if (value === null || value === undefined) return null;
  return typeof value === 'string' ? value : JSON.stringify(value);
}

describe.each(engines)('PostgreSQL to ClickHouse ($name)', (engine) => {
  let harness: Harness;
  let admin: ClickHouseClient;
  const database = `tributary_e2e_${randomBytes(4).toString('hex')}`;
  const config = engine.config(database);

  const destinationFor = (spec: SpecInput) =>
    new ClickHouseDestination(config, {
      mirror: spec.name,
      mirrorColumns: { softDeleteColumn: spec.softDeleteColName, syncedAtColumn: spec.syncedAtColName },
      tableMappings: mirrorSpecSchema.parse({ ...spec, sourcePeer: 's', destinationPeer: 'd' }).tableMappings,
      maxBatchSize: spec.maxBatchSize ?? 1_000_000,
      logger,
    });

  const start = (spec: SpecInput): RunningMirror =>
    startMirror(harness, spec, { wrapDestination: () => destinationFor(spec) });

  /** Drop: slot and publication go, the checkpoint is forgotten, tables stay. */
  async function drop(spec: SpecInput): Promise<void> {
    const destination = destinationFor(spec);
    try {
      const parsed = mirrorSpecSchema.parse({ ...spec, sourcePeer: 's', destinationPeer: 'd' });
      await teardownMirror({
        spec: parsed,
        source: createSource({ kind: 'relational', config: harness.source.config }, { mirror: parsed.name }),
        destination,
        catalog: harness.catalog,
        logger,
      });
    } finally {
      await destination.close();
    }
  }

  async function chRows<T = Record<string, unknown>>(query: string): Promise<T[]> {
    const result = await admin.query({ query, format: 'JSONEachRow' });
    return result.json<T>();
  }

  async function compared(
    table: string,
    checks: readonly Check[],
  ): Promise<{ source: unknown[]; target: unknown[] }> {
    const sourceRows = await harness.source.client.query<unknown[]>({
      text: `SELECT ${checks.map((check) => check.pg).join(', ')} FROM ${table} ORDER BY ${table}.id`,
      rowMode: 'array',
    });
    const targetRows = await chRows(
      `SELECT ${checks.map((check, index) => `${check.ch} AS c${index}`).join(', ')}
       FROM ${database}.${table} FINAL WHERE _tributary_is_deleted = 0 ORDER BY id`,
    );
    return {
      source: sourceRows.rows.map((row) =>
        checks.map((check, index) => {
          const text = (row[index] ?? null) as string | null;
          return normalise(check.fromPg ? check.fromPg(text) : text);
        }),
      ),
      target: targetRows.map((row) =>
        checks.map((check, index) => {
          const value = row[`c${index}`] ?? null;
          return normalise(check.fromCh ? check.fromCh(value) : value);
        }),
      ),
    };
  }

  /** Waits until the FINAL rows equal the source row by row, then asserts it (the diff names the rows). */
  async function expectSameRows(table: string, checks: readonly Check[], timeoutMs = 30_000): Promise<void> {
    await waitFor(
      async () => {
        const { source, target } = await compared(table, checks);
        return JSON.stringify(source) === JSON.stringify(target);
      },
      timeoutMs,
      `${table} to match`,
    ).catch(() => {});
    const { source, target } = await compared(table, checks);
    // The first differing rows only: a diff of thousands of rows takes vitest minutes to print.
    const differences = [];
    for (let index = 0; index < Math.max(source.length, target.length) && differences.length < 5; index++) {
      if (JSON.stringify(source[index]) !== JSON.stringify(target[index])) {
        differences.push({ row: index, source: source[index], target: target[index] });
      }
    }
    expect({ rows: target.length, differences }).toEqual({ rows: source.length, differences: [] });
  }

  const running = (mirror: string) =>
    waitFor(async () => (await harness.catalog.getRuntime(mirror))?.phase === 'running', 20_000, 'running');

  beforeAll(async () => {
    harness = await createHarness('p2ch');
    // The session settings the engine reads values under, so the texts compared here match.
    await harness.source.client.query(
      `SET DateStyle = ISO; SET TimeZone = UTC; SET IntervalStyle = postgres; SET extra_float_digits = 3; SET bytea_output = hex`,
    );
    admin = createClient({
      url: `http://127.0.0.1:${config.httpPort}`,
      username: config.user,
      password: config.password,
      request_timeout: 60_000,
      // Polls query tables before the mirror creates them.
      log: { level: ClickHouseLogLevel.OFF },
    });
    await admin.command({ query: `CREATE DATABASE ${database}` });
  });

  afterAll(async () => {
    await admin?.command({ query: `DROP DATABASE IF EXISTS ${database}` });
    await admin?.close();
    await harness?.close();
  });

  it('loads a partitioned snapshot, then streams inserts, updates, key changes, deletes and truncates', async () => {
    const { source } = harness;
    await source.client.query(
      `CREATE TABLE orders (id bigint PRIMARY KEY, customer text NOT NULL, amount numeric(12,2), placed timestamptz)`,
    );
    await source.client.query(`CREATE TABLE notes (id int PRIMARY KEY, body text)`);
    await source.client.query(
      `INSERT INTO orders SELECT g, 'customer ' || g, g * 1.5, '2024-01-01'::timestamptz + g * interval '1 minute'
       FROM generate_series(1, 20000) g`,
    );
    await source.client.query(
      `INSERT INTO notes VALUES (1, 'first'), (2, E'tab\\there\\nnew line \\\\ slash')`,
    );
    await source.client.query(`ANALYZE orders`);
    const spec: SpecInput = {
      name: `snap-${randomSuffix()}`,
      tableMappings: [mapping('orders'), mapping('notes')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
      snapshotNumRowsPerPartition: 3000,
      snapshotMaxParallelWorkers: 3,
      snapshotNumTablesInParallel: 2,
    };
    const orders = [plain('id'), plain('customer'), decimal('amount'), timestamp('placed', engine)];
    const notes = [plain('id'), plain('body')];
    const mirror = start(spec);
    await expectSameRows('orders', orders);
    await expectSameRows('notes', notes);
    const progress = await harness.catalog.listSnapshotProgress(spec.name);
    expect(progress.find((table) => table.sourceTable === 'public.orders')?.partitionsTotal).toBeGreaterThan(
      3,
    );
    await running(spec.name);

    await source.client.query(
      `INSERT INTO orders VALUES (20001, 'new', 1, now()), (20002, 'newer', 2, NULL)`,
    );
    await source.client.query(`UPDATE orders SET amount = amount + 100 WHERE id % 1000 = 0`);
    await source.client.query(`UPDATE orders SET id = 30000 WHERE id = 5`);
    await source.client.query(`DELETE FROM orders WHERE id BETWEEN 100 AND 199`);
    await source.client.query(
      `BEGIN; UPDATE orders SET customer = 'twice' WHERE id = 7; DELETE FROM orders WHERE id = 7; INSERT INTO orders VALUES (7, 'back', 7, NULL); COMMIT`,
    );
    await source.client.query(`INSERT INTO notes VALUES (3, NULL)`);
    await source.client.query(`TRUNCATE notes`);
    await source.client.query(`INSERT INTO notes VALUES (4, 'after truncate')`);
    await expectSameRows('orders', orders);
    await expectSameRows('notes', notes);
    if (engine.modern) {
      // ReplacingMergeTree(version, is_deleted): FINAL alone hides deleted rows.
      const [counted] = await chRows<{ n: string }>(
        `SELECT toString(count()) AS n FROM ${database}.orders FINAL`,
      );
      const [expected] = (await source.client.query<{ n: string }>(`SELECT count(*)::text AS n FROM orders`))
        .rows;
      expect(counted?.n).toBe(expected?.n);
    }
    expect(await mirror.stop()).toBe('stopped');
    const checkpoint = await chRows<{ batch: string }>(
      `SELECT toString(batch_id) AS batch FROM ${database}._tributary_checkpoints FINAL WHERE mirror = '${spec.name}'`,
    );
    expect(Number(checkpoint[0]?.batch)).toBeGreaterThan(0);
    await drop(spec);
    expect(
      await chRows(
        `SELECT batch_id FROM ${database}._tributary_checkpoints FINAL WHERE mirror = '${spec.name}' AND batch_id > 0`,
      ),
    ).toEqual([]);
  });

  it('does not empty a populated table another mirror loaded, unless resyncing', async () => {
    const { source } = harness;
    await source.client.query(`CREATE TABLE claimed (id int PRIMARY KEY, body text)`);
    await source.client.query(`INSERT INTO claimed VALUES (1, 'one'), (2, 'two')`);
    const checks = [plain('id'), plain('body')];
    const first: SpecInput = {
      name: `claim-${randomSuffix()}`,
      tableMappings: [mapping('claimed')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const loaded = start(first);
    await expectSameRows('claimed', checks);
    await loaded.stop();
    await drop(first);
    // Another mirror mapped onto the loaded table would wipe it: refused, rows kept.
    const second: SpecInput = { ...first, name: `claim-other-${randomSuffix()}` };
    await expect(start(second).done).rejects.toMatchObject({
      kind: 'config',
      message: expect.stringContaining(`destination table(s) public.claimed already hold rows`),
    });
    const [kept] = await chRows<{ n: string }>(`SELECT toString(count()) AS n FROM ${database}.claimed`);
    expect(kept?.n).toBe('2');
    await drop(second);
    const resync = start({ ...second, name: `claim-resync-${randomSuffix()}`, resync: true });
    try {
      await source.client.query(`INSERT INTO claimed VALUES (3, 'three')`);
      await expectSameRows('claimed', checks);
    } finally {
      await resync.stop();
    }
    await drop({ ...second, name: resync.spec.name });
  });

  it('copies and streams every mapped type exactly (system Q)', async () => {
    const { source } = harness;
    await source.client.query(`CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')`);
    await source.client.query(`CREATE DOMAIN positive_int AS int CHECK (VALUE > 0)`);
    // The column list and values of test/e2e/pg-to-pg.test.ts.
    await source.client.query(`CREATE TABLE types (
      id int PRIMARY KEY, i2 smallint, i8 bigint, num numeric, num_scaled numeric(30,10), f4 real, f8 double precision,
      b boolean, t text, c char(5), vc varchar(20), by bytea, u uuid, j json, jb jsonb, d date, tm time, ttz timetz,
      ts timestamp, tstz timestamptz, iv interval, ia int[], ta text[], nested int[][], e mood, dom positive_int,
      ip inet, net cidr, mac macaddr, hs hstore, pt point, bx box, m money, bt bit(4), vb varbit, x xml)`);
    await source.client.query(`INSERT INTO types VALUES
      (1, -32768, 9223372036854775807, 123456789012345678901234567890.123456789, -1.5, 'NaN', 'Infinity',
       true, E'multi\\nline\\ttab \\\\ "quoted"', 'ab', 'varchar', '\\xdeadbeef', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11',
       '{"big": 12345678901234567890}', '{"a": [1, 2, {"b": null}]}', '2024-02-29', '23:59:59.999999', '12:00:00+05:30',
       '2024-01-01 12:34:56.123456', '1999-12-31 23:59:59.5+02', '1 year 2 mons 3 days 04:05:06.789',
       '{1,NULL,3}', '{"a,b","NULL",NULL,"q\\"uote"}', '{{1,2},{3,4}}', 'happy', 7,
       '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03', 'a=>1, "b c"=>NULL', '(1.5,-2)', '((0,0),(1,1))', '12.34',
       B'1010', B'10101', '<a>x</a>'),
      (2, NULL, -9223372036854775808, 'NaN', 0, '-Infinity', -0.0, false, '', NULL, NULL, '\\x', NULL, 'null', '[]',
       '0044-03-15 BC', '00:00:00', NULL, 'infinity', '-infinity', '-1 days +02:03:00', '{}', '{}', NULL, 'sad', 1,
       '::1', '::/0', NULL, '', NULL, NULL, '-0.01', B'0000', B'', NULL)`);
    const columnNames =
      'i2, i8, num, num_scaled, f4, f8, b, t, c, vc, by, u, j, jb, d, tm, ttz, ts, tstz, iv, ia, ta, nested, e, dom, ip, net, mac, hs, pt, bx, m, bt, vb, x';
    const checks: Check[] = [
      plain('id'),
      plain('i2'),
      plain('i8'),
      plain('num'),
      decimal('num_scaled'),
      { pg: 'f4::text', ch: 'toString(f4)', fromPg: floatText },
      { pg: 'f8::text', ch: 'toString(f8)', fromPg: floatText },
      {
        pg: 'b::text',
        ch: 'toString(b)',
        fromPg: (text) => text,
        fromCh: (value) => (value === null ? null : ['true', '1'].includes(String(value)) ? 'true' : 'false'),
      },
      plain('t'),
      plain('c'),
      plain('vc'),
      { pg: `encode(by, 'hex')`, ch: 'lower(hex(by))' },
      plain('u'),
      plain('j'),
      plain('jb'),
      date('d', engine),
      { pg: `(extract(epoch FROM tm) * 1000000)::bigint::text`, ch: 'toString(tm)' },
      plain('ttz'),
      timestamp('ts', engine),
      timestamp('tstz', engine),
      plain('iv'),
      { pg: 'ia::text', ch: 'ia', fromPg: structured({ kind: 'array', element: { kind: 'int32' } }, []) },
      { pg: 'ta::text', ch: 'ta', fromPg: structured({ kind: 'array', element: { kind: 'string' } }, []) },
      {
        pg: 'nested::text',
        ch: 'nested',
        fromPg: structured({ kind: 'array', element: { kind: 'int32' } }, []),
      },
      plain('e'),
      plain('dom'),
      plain('ip'),
      plain('net'),
      plain('mac'),
      engine.modern
        ? {
            pg: 'hs::text',
            ch: 'hs',
            fromPg: structured({ kind: 'hstore' }, []),
            fromCh: (value) => JSON.stringify(sortedEntries(value as Record<string, unknown>)),
          }
        : plain('hs'),
      plain('pt'),
      plain('bx'),
      plain('m'),
      plain('bt'),
      plain('vb'),
      plain('x'),
    ];
    const spec: SpecInput = {
      name: `types-${randomSuffix()}`,
      tableMappings: [mapping('types')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const mirror = start(spec);
    await expectSameRows('types', checks);
    const [typeOf] = await chRows<Record<string, string>>(
      `SELECT toTypeName(nested) AS nested, toTypeName(dom) AS dom, toTypeName(num_scaled) AS num_scaled FROM ${database}.types LIMIT 1`,
    );
    expect(typeOf).toEqual({
      nested: 'Array(Array(Nullable(Int32)))',
      dom: 'Nullable(Int32)',
      num_scaled: 'Nullable(Decimal(30, 10))',
    });
    await running(spec.name);
    // The same values again, now through pgoutput instead of COPY.
    await source.client.query(`INSERT INTO types SELECT id + 10, ${columnNames} FROM types`);
    await source.client.query(`UPDATE types SET t = t || '!' WHERE id = 1`);
    await expectSameRows('types', checks);
    await mirror.stop();
    await drop(spec);
  });

  it('keeps unchanged TOAST values without REPLICA IDENTITY FULL, with soft delete, synced-at and exclusions', async () => {
    const { source } = harness;
    await source.client.query(`CREATE TABLE docs (id int PRIMARY KEY, title text, body text, secret text)`);
    // EXTERNAL storage keeps long values out of line (TOASTed) and uncompressed.
    await source.client.query(`ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL`);
    await source.client.query(
      `INSERT INTO docs SELECT g, 'title ' || g, (SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 400)), 's'
       FROM generate_series(1, 3) g`,
    );
    const spec: SpecInput = {
      name: `toast-${randomSuffix()}`,
      tableMappings: [mapping('docs', ['secret'])],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
      softDeleteColName: '_deleted',
      syncedAtColName: '_synced_at',
    };
    const checks: Check[] = [plain('id'), plain('title'), { pg: 'md5(body)', ch: 'lower(hex(MD5(body)))' }];
    const mirror = start(spec);
    await expectSameRows('docs', checks);
    await running(spec.name);
    await source.client.query(`UPDATE docs SET title = 'changed' WHERE id = 1`);
    await source.client.query(`DELETE FROM docs WHERE id = 2`);
    const flag = engine.modern ? 'toUInt8(_deleted)' : '_deleted';
    const read = () =>
      chRows<{ id: number; title: string; body: string; deleted: number; synced: number }>(
        `SELECT id, title, lower(hex(MD5(body))) AS body, ${flag} AS deleted, _synced_at > toDateTime('2020-01-01 00:00:00') AS synced
         FROM ${database}.docs FINAL WHERE _tributary_is_deleted = 0 ORDER BY id`,
      );
    await waitFor(
      async () => (await read()).some((row) => row.id === 2 && row.deleted === 1),
      30_000,
      'soft delete',
    );
    const bodies = await source.client.query<{ id: number; body: string }>(
      `SELECT id, md5(body) AS body FROM docs ORDER BY id`,
    );
    const body = (id: number) => bodies.rows.find((row) => row.id === id)?.body;
    expect(
      (await read()).map(({ id, title, body: hash, deleted, synced }) => ({
        id,
        title,
        hash,
        deleted,
        synced,
      })),
    ).toEqual([
      { id: 1, title: 'changed', hash: body(1), deleted: 0, synced: 1 },
      // The deleted row stays, flagged, with its values.
      { id: 2, title: 'title 2', hash: expect.stringMatching(/^[0-9a-f]{32}$/), deleted: 1, synced: 1 },
      { id: 3, title: 'title 3', hash: body(3), deleted: 0, synced: 1 },
    ]);
    const columns = await chRows<{ name: string }>(
      `SELECT name FROM system.columns WHERE database = '${database}' AND table = 'docs'`,
    );
    expect(columns.map((column) => column.name)).toEqual([
      'id',
      'title',
      'body',
      '_deleted',
      '_synced_at',
      '_tributary_is_deleted',
      '_tributary_version',
    ]);
    await mirror.stop();
    await drop(spec);
  });

  it('adds a column that appears at the source without a restart', async () => {
    const { source } = harness;
    await source.client.query(`CREATE TABLE evolving (id int PRIMARY KEY, a text)`);
    const spec: SpecInput = {
      name: `ddl-${randomSuffix()}`,
      tableMappings: [mapping('evolving')],
      doInitialSnapshot: false,
      idleTimeoutSeconds: 1,
    };
    const mirror = start(spec);
    await running(spec.name);
    await source.client.query(`INSERT INTO evolving VALUES (1, 'before')`);
    await source.client.query(`ALTER TABLE evolving ADD COLUMN b numeric(8,3)`);
    await source.client.query(`INSERT INTO evolving VALUES (2, 'after', 12.5)`);
    await source.client.query(`UPDATE evolving SET b = 1.25 WHERE id = 1`);
    await expectSameRows('evolving', [plain('id'), plain('a'), decimal('b')]);
    const [type] = await chRows<{ type: string }>(
      `SELECT type FROM system.columns WHERE database = '${database}' AND table = 'evolving' AND name = 'b'`,
    );
    expect(type?.type).toBe('Nullable(Decimal(8, 3))');
    await mirror.stop();
    await drop(spec);
  });

  it('loses and duplicates nothing across kill -9s of the engine under continuous writes', async () => {
    const { source } = harness;
    await source.client.query(
      `CREATE TABLE ledger (id bigint PRIMARY KEY, account int NOT NULL, amount numeric(14,2) NOT NULL, note text)`,
    );
    await source.client.query(
      `INSERT INTO ledger SELECT g, g % 50, g * 0.01, 'seed ' || g FROM generate_series(1, 20000) g`,
    );
    const name = `crash-${randomSuffix()}`;
    const destination: Peer = { name: 'analytics', kind: 'analytics', config };
    const configPath = writeEngineConfig(
      harness,
      {
        name,
        sourcePeer: 'source',
        destinationPeer: 'analytics',
        tableMappings: [mapping('ledger')],
        doInitialSnapshot: true,
        idleTimeoutSeconds: 1,
        maxBatchSize: 300,
        snapshotNumRowsPerPartition: 4000,
      },
      { destination },
    );
    const writer = startLedgerWriter(source.client, { firstId: 20_001 });
    // The first kill lands in the initial load; the others once CDC runs, mid-batch or between batches.
    for (let kill = 0; kill < 4; kill++) {
      const child = startEngine(name, configPath);
      if (kill > 0) await running(name);
      await new Promise((resolve) => setTimeout(resolve, 300 + Math.floor(Math.random() * 1500)));
      child.kill('SIGKILL');
      await exited(child);
    }
    await writer.stop();

    const checks = [plain('id'), plain('account'), decimal('amount'), plain('note')];
    const engineProcess = startEngine(name, configPath);
    try {
      await expectSameRows('ledger', checks, 90_000);
    } finally {
      engineProcess.kill('SIGTERM');
      expect(await exited(engineProcess)).toBe(0);
    }
    expect((await harness.catalog.getRuntime(name))?.phase).toBe('running');
    const { batches } = await harness.catalog.listBatches(name, { limit: 0, ascending: true });
    expect(batches.length).toBeGreaterThan(3);
  });
  it('goes on inside a transaction many batches long after each kill -9 of the engine', async () => {
    const { source } = harness;
    await source.client.query(
      `CREATE TABLE huge (id bigint PRIMARY KEY, account int NOT NULL, amount numeric(14,2) NOT NULL, note text)`,
    );
    const name = `huge-${randomSuffix()}`;
    const configPath = writeEngineConfig(
      harness,
      {
        name,
        sourcePeer: 'source',
        destinationPeer: 'analytics',
        tableMappings: [mapping('huge')],
        doInitialSnapshot: true,
        idleTimeoutSeconds: 1,
        maxBatchSize: 500,
      },
      { destination: { name: 'analytics', kind: 'analytics', config } },
    );
    /** Where the checkpoint is inside the open transaction, as "changeLsn#rank" (empty when none). */
    const position = async () => {
      const [row] = await chRows<{ batch: string; change: string; rank: string }>(
        `SELECT toString(batch_id) AS batch, toString(txn_change_lsn) AS change, toString(txn_change_rank) AS rank
         FROM ${database}._tributary_checkpoints FINAL WHERE mirror = '${name}'`,
      ).catch(() => []);
      return row && row.change !== '0' ? { lsn: BigInt(row.change), rank: Number(row.rank) } : undefined;
    };
    let child = startEngine(name, configPath);
    try {
      await running(name);
      await source.client.query('BEGIN');
      await source.client.query(
        `INSERT INTO huge SELECT g, g % 50, g * 0.01, 'n' || g FROM generate_series(1, 20000) g`,
      );
      await source.client.query(`UPDATE huge SET amount = amount + 1 WHERE id % 7 = 0`);
      await source.client.query(`DELETE FROM huge WHERE id % 11 = 0`);
      await source.client.query('COMMIT');
      let previous: { lsn: bigint; rank: number } | undefined;
      for (let kill = 0; kill < 3; kill++) {
        // Kill once this run stored a place further into the transaction.
        await waitFor(
          async () => {
            const now = await position();
            return (
              !!now &&
              (!previous || now.lsn > previous.lsn || (now.lsn === previous.lsn && now.rank > previous.rank))
            );
          },
          60_000,
          `progress after restart ${kill}`,
        );
        child.kill('SIGKILL');
        await exited(child);
        previous = await position();
        child = startEngine(name, configPath);
      }
      await expectSameRows('huge', [plain('id'), plain('account'), decimal('amount'), plain('note')], 90_000);
    } finally {
      child.kill('SIGTERM');
      await exited(child);
    }
    const logs = await harness.catalog.listLogs({ mirror: name, levels: ['INFO'], offset: 0, limit: 100 });
    expect(
      logs.entries.filter((entry) => entry.message.startsWith('resuming the transaction')).length,
    ).toBeGreaterThanOrEqual(3);
  });
});

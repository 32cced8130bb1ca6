// PostgreSQL to Snowflake end to end: on the emulator of the test environment
// (fakesnow behind its adapter) always, and on a real account as well when the
// TRIBUTARY_SNOWFLAKE_* variables are set (skipped otherwise; docs/snowflake.md).
// Target tables go to a throw-away schema TRIB_TEST_<random>, dropped
// afterwards with the test mirrors' changes tables.
import { createHash } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChangeList } from '../../engine/src/connectors/records.ts';
import { createSource } from '../../engine/src/connectors/registry.ts';
import { rowOfCells } from '../../engine/src/connectors/rows.ts';
import { SnowflakeDestination } from '../../engine/src/connectors/snowflake/destination.ts';
import {
  abortDetachedTransactions,
  transactionName,
} from '../../engine/src/connectors/snowflake/detached.ts';
import { openSession } from '../../engine/src/connectors/snowflake/session.ts';
import { teardownMirror } from '../../engine/src/pipeline/run-mirror.ts';
import { mirrorSpecSchema } from '../../engine/src/resources/mirror.ts';
import type { DatawarehouseConfig, Peer } from '../../engine/src/resources/peer.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import { exited, startEngine, writeEngineConfig } from '../support/engine-process.ts';
import { startLedgerWriter } from '../support/ledger-writer.ts';
import {
  createHarness,
  type Harness,
  type RunningMirror,
  type SpecInput,
  startMirror,
} from '../support/mirror-harness.ts';
import { emulatorConfig, realAccount, SnowflakeAdmin, uniqueName } from '../support/snowflake-peer.ts';

const logger = pino({ level: process.env.TRIBUTARY_TEST_LOG ?? 'silent' });
const real = realAccount();

/** One compared column: an expression giving text at the source, and one at Snowflake. */
interface Check {
  readonly pg: string;
  readonly sf: string;
}

const text = (name: string): Check => ({ pg: `${name}::text`, sf: `TO_VARCHAR("${name.toUpperCase()}")` });
const micros = (name: string): Check => ({
  pg: `(extract(epoch FROM ${name}) * 1000000)::bigint::text`,
  sf: `TO_VARCHAR(DATE_PART(EPOCH_MICROSECOND, "${name.toUpperCase()}"))`,
});

// The emulator always; a real account only when TRIBUTARY_SNOWFLAKE_* are set.
const targets = [
  { name: 'emulator', config: (): DatawarehouseConfig => emulatorConfig(uniqueName('E2E')), skip: false },
  {
    name: 'real account',
    config: (): DatawarehouseConfig => real as DatawarehouseConfig,
    skip: real === undefined,
  },
];

describe.each(targets)('PostgreSQL to Snowflake ($name)', ({ config: configOf, skip }) => {
  const config = skip ? emulatorConfig('UNUSED') : configOf();
  /** The destination schema, as the source names it; the connector upper-cases it. */
  const schema = `trib_test_${randomSuffix()}`.toLowerCase();
  const target = (table: string) => `"${config.database}"."${schema.toUpperCase()}"."${table.toUpperCase()}"`;
  const mirrors: string[] = [];
  function tableMapping(table: string, exclude: string[] = []) {
    return { source: { schema: 'public', table }, destination: { schema, table }, exclude };
  }
  let harness: Harness;
  let admin: SnowflakeAdmin;

  const destinationFor = (spec: SpecInput) => {
    if (!mirrors.includes(spec.name)) mirrors.push(spec.name);
    return new SnowflakeDestination(config, {
      mirror: spec.name,
      mirrorColumns: { softDeleteColumn: spec.softDeleteColName, syncedAtColumn: spec.syncedAtColName },
      logger,
    });
  };

  const start = (spec: SpecInput): RunningMirror =>
    startMirror(harness, spec, { wrapDestination: () => destinationFor(spec) });

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

  async function compared(table: string, checks: readonly Check[], where = 'TRUE') {
    const source = await harness.source.client.query<unknown[]>({
      text: `SELECT ${checks.map((check) => check.pg).join(', ')} FROM ${table} ORDER BY ${table}.id`,
      rowMode: 'array',
    });
    const rows = await admin.rows(
      `SELECT ${checks.map((check, index) => `${check.sf} AS "C${index}"`).join(', ')}
       FROM ${target(table)} WHERE ${where} ORDER BY "ID"`,
    );
    return {
      source: source.rows.map((row) => row.map((cell) => cell ?? null)),
      target: rows.map((row) => checks.map((_, index) => row[`C${index}`] ?? null)),
    };
  }

  /** Waits until the Snowflake rows equal the source row by row, then asserts it (the diff names the rows). */
  async function expectSameRows(table: string, checks: readonly Check[], where?: string, timeoutMs = 60_000) {
    await waitFor(
      async () => {
        try {
          const { source, target: rows } = await compared(table, checks, where);
          return JSON.stringify(source) === JSON.stringify(rows);
        } catch {
          return false; // the table may not exist yet
        }
      },
      timeoutMs,
      `${table} to match`,
    ).catch(() => {});
    const { source, target: rows } = await compared(table, checks, where);
    const differences = [];
    for (let index = 0; index < Math.max(source.length, rows.length) && differences.length < 5; index++) {
      if (JSON.stringify(source[index]) !== JSON.stringify(rows[index])) {
        differences.push({ row: index, source: source[index], target: rows[index] });
      }
    }
    expect({ rows: rows.length, differences }).toEqual({ rows: source.length, differences: [] });
  }

  /** A hash of every row of a target table (the emulator has no HASH_AGG). */
  async function tableHash(table: string, columns: readonly string[]): Promise<string> {
    const rows = await admin.rows(
      `SELECT ${columns.map((name) => `TO_VARCHAR("${name}") AS "${name}"`).join(', ')} FROM ${target(table)} ORDER BY "ID"`,
    );
    return createHash('sha256').update(JSON.stringify(rows)).digest('hex');
  }

  const crashMirror = `crash-${randomSuffix()}`;

  const running = (mirror: string) =>
    waitFor(async () => (await harness.catalog.getRuntime(mirror))?.phase === 'running', 30_000, 'running');

  beforeAll(async () => {
    if (skip) return;
    harness = await createHarness('p2sf');
    await harness.source.client.query(`SET DateStyle = ISO; SET TimeZone = UTC; SET extra_float_digits = 3`);
    admin = new SnowflakeAdmin(config);
    await admin.rows(`CREATE SCHEMA IF NOT EXISTS "${config.database}"."${schema.toUpperCase()}"`);
  });

  afterAll(async () => {
    await admin
      ?.rows(`DROP SCHEMA IF EXISTS "${config.database}"."${schema.toUpperCase()}" CASCADE`)
      .catch(() => {});
    await admin?.close();
    await harness?.close();
  });

  it.skipIf(skip)(
    'loads a partitioned snapshot in parallel, then streams inserts, updates, key changes, deletes and truncates',
    async () => {
      const { source } = harness;
      await source.client.query(
        `CREATE TABLE orders (id bigint PRIMARY KEY, customer text NOT NULL, amount numeric(12,2), placed timestamptz,
         big numeric, doc jsonb, raw bytea, flag boolean)`,
      );
      await source.client.query(`CREATE TABLE notes (id int PRIMARY KEY, body text)`);
      await source.client.query(
        `INSERT INTO orders SELECT g, 'customer ' || g, g * 1.5, '2024-01-01'::timestamptz + g * interval '1 minute',
         (g::numeric * 1000000000000000000000) + 0.125, jsonb_build_object('g', g, 'big', 12345678901234567890),
         decode(lpad(to_hex(g), 8, '0'), 'hex'), g % 2 = 0
       FROM generate_series(1, 3000) g`,
      );
      await source.client.query(
        `INSERT INTO notes VALUES (1, 'first'), (2, E'tab\\there\\nnew line \\\\ "quoted", comma')`,
      );
      await source.client.query(`ANALYZE orders`);
      const spec: SpecInput = {
        name: `snap-${randomSuffix()}`,
        tableMappings: [tableMapping('orders'), tableMapping('notes')],
        doInitialSnapshot: true,
        idleTimeoutSeconds: 1,
        snapshotNumRowsPerPartition: 700,
        snapshotMaxParallelWorkers: 3,
        snapshotNumTablesInParallel: 2,
      };
      const orders: Check[] = [
        text('id'),
        text('customer'),
        text('amount'),
        micros('placed'),
        text('big'),
        { pg: `upper(encode(raw, 'hex'))`, sf: `HEX_ENCODE("RAW")` },
        {
          pg: `CASE WHEN flag THEN 'true' ELSE 'false' END`,
          sf: `CASE WHEN "FLAG" THEN 'true' ELSE 'false' END`,
        },
        { pg: `(doc->>'big')`, sf: `"DOC":big::VARCHAR` },
      ];
      const notes = [text('id'), text('body')];
      const mirror = start(spec);
      await expectSameRows('orders', orders);
      await expectSameRows('notes', notes);
      const progress = await harness.catalog.listSnapshotProgress(spec.name);
      expect(
        progress.find((table) => table.sourceTable === 'public.orders')?.partitionsTotal,
      ).toBeGreaterThan(3);
      await running(spec.name);

      await source.client.query(
        `INSERT INTO orders (id, customer, amount, placed) VALUES (5001, 'new', 1, now()), (5002, 'newer', 2, NULL)`,
      );
      await source.client.query(`UPDATE orders SET amount = amount + 100 WHERE id % 100 = 0`);
      await source.client.query(`UPDATE orders SET id = 9000 WHERE id = 5`);
      await source.client.query(`DELETE FROM orders WHERE id BETWEEN 100 AND 199`);
      await source.client.query(
        `BEGIN; UPDATE orders SET customer = 'twice' WHERE id = 7; DELETE FROM orders WHERE id = 7; INSERT INTO orders (id, customer) VALUES (7, 'back'); COMMIT`,
      );
      await source.client.query(`INSERT INTO notes VALUES (3, NULL)`);
      await source.client.query(`TRUNCATE notes`);
      await source.client.query(`INSERT INTO notes VALUES (4, 'after truncate')`);
      await expectSameRows('orders', orders);
      await expectSameRows('notes', notes);
      expect(await mirror.stop()).toBe('stopped');
      const [checkpoint] = await admin.rows(
        `SELECT TO_VARCHAR("BATCH_ID") AS "B" FROM "${config.database}"."_TRIBUTARY_INTERNAL"."CHECKPOINTS" WHERE "MIRROR" = '${spec.name}'`,
      );
      expect(Number(checkpoint?.B)).toBeGreaterThan(0);
      // Nothing of the mirror's batches is left staged.
      const staged = await admin.rows(
        `SELECT COUNT(*) AS "N" FROM "${config.database}"."_TRIBUTARY_INTERNAL"."CHANGES_${spec.name.toUpperCase()}"`,
      );
      expect(Number(staged[0]?.N)).toBe(0);

      // A replayed batch (its id at or below the checkpoint) leaves the same table hash.
      const columns = ['ID', 'CUSTOMER', 'AMOUNT'];
      const before = await tableHash('orders', columns);
      const destination = destinationFor(spec);
      try {
        const table = {
          source: { schema: 'public', table: 'orders' },
          destination: { schema, table: 'orders' },
          columns: [
            { name: 'id', typeOid: 20, typeModifier: -1, typeName: 'bigint', notNull: true },
            { name: 'customer', typeOid: 25, typeModifier: -1, typeName: 'text', notNull: true },
          ],
          keyColumns: ['id'],
        };
        const transaction = { xid: 1, commitLsn: 1n, commitTimeMicros: 0n };
        await destination.syncBatch({
          mirror: spec.name,
          batchId: BigInt(checkpoint?.B as string),
          endLsn: 1n,
          tables: [
            {
              table,
              held: ChangeList.of([
                { transaction, kind: 'insert', newRow: rowOfCells(['1', 'replayed']) },
                { transaction, kind: 'delete', oldKey: rowOfCells(['2', null]) },
              ]),
            },
          ],
          rowCount: 2,
        });
      } finally {
        await destination.close();
      }
      expect(await tableHash('orders', columns)).toBe(before);
      await drop(spec);
      expect(
        await admin.rows(
          `SELECT 1 AS "X" FROM "${config.database}"."_TRIBUTARY_INTERNAL"."CHECKPOINTS" WHERE "MIRROR" = '${spec.name}'`,
        ),
      ).toEqual([]);
    },
  );

  it.skipIf(skip)(
    'keeps unchanged TOAST values without REPLICA IDENTITY FULL, with soft delete, synced-at and exclusions',
    async () => {
      const { source } = harness;
      await source.client.query(`CREATE TABLE docs (id int PRIMARY KEY, title text, body text, secret text)`);
      // Large and incompressible enough to be stored out of line (TOASTed).
      await source.client.query(
        `INSERT INTO docs SELECT g, 'title ' || g, (SELECT string_agg(md5(g::text || i::text), '') FROM generate_series(1, 400) i), 'hidden'
       FROM generate_series(1, 5) g`,
      );
      const spec: SpecInput = {
        name: `toast-${randomSuffix()}`,
        tableMappings: [tableMapping('docs', ['secret'])],
        doInitialSnapshot: true,
        idleTimeoutSeconds: 1,
        softDeleteColName: '_tributary_is_deleted',
        syncedAtColName: '_tributary_synced_at',
      };
      const checks = [text('id'), text('title'), { pg: 'md5(body)', sf: 'MD5("BODY")' }];
      const mirror = start(spec);
      try {
        await expectSameRows('docs', checks);
        await running(spec.name);
        // Only the title changes: the body is not resent (unchanged TOAST).
        await source.client.query(`UPDATE docs SET title = title || ' edited' WHERE id <= 3`);
        await source.client.query(`DELETE FROM docs WHERE id = 5`);
        // A key change that does not resend the body either.
        await source.client.query(`UPDATE docs SET id = 40, title = 'moved' WHERE id = 4`);
        await expectSameRows('docs', checks, `NOT "_TRIBUTARY_IS_DELETED"`);
        const rows = await admin.rows(
          `SELECT "ID", "_TRIBUTARY_IS_DELETED" AS "DELETED", "_TRIBUTARY_SYNCED_AT" IS NOT NULL AS "SYNCED" FROM ${target('docs')} ORDER BY "ID"`,
        );
        expect(rows.map((row) => [row.ID, row.DELETED, row.SYNCED])).toEqual([
          [1, false, true],
          [2, false, true],
          [3, false, true],
          [4, true, true],
          [5, true, true],
          [40, false, true],
        ]);
        const columns = await admin.rows(
          `SELECT COLUMN_NAME AS "NAME" FROM "${config.database}".INFORMATION_SCHEMA.COLUMNS
         WHERE TABLE_SCHEMA = '${schema.toUpperCase()}' AND TABLE_NAME = 'DOCS' ORDER BY COLUMN_NAME`,
        );
        expect(columns.map((column) => column.NAME)).not.toContain('SECRET');
      } finally {
        await mirror.stop();
        await drop(spec);
      }
    },
  );

  it.skipIf(skip)('adds a column that appears at the source without a restart', async () => {
    const { source } = harness;
    await source.client.query(`CREATE TABLE growing (id int PRIMARY KEY, a text)`);
    await source.client.query(`INSERT INTO growing VALUES (1, 'one')`);
    const spec: SpecInput = {
      name: `grow-${randomSuffix()}`,
      tableMappings: [tableMapping('growing')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const mirror = start(spec);
    try {
      await expectSameRows('growing', [text('id'), text('a')]);
      await running(spec.name);
      await source.client.query(`ALTER TABLE growing ADD COLUMN b numeric(10,3)`);
      await source.client.query(`INSERT INTO growing VALUES (2, 'two', 2.5)`);
      await source.client.query(`UPDATE growing SET b = 1.125 WHERE id = 1`);
      await expectSameRows('growing', [text('id'), text('a'), text('b')]);
    } finally {
      await mirror.stop();
      await drop(spec);
    }
  });

  it.skipIf(skip)(
    'loses and duplicates nothing across kill -9s of the engine under continuous writes',
    async () => {
      const { source } = harness;
      await source.client.query(
        `CREATE TABLE ledger (id bigint PRIMARY KEY, account int NOT NULL, amount numeric(14,2) NOT NULL, note text)`,
      );
      await source.client.query(
        `INSERT INTO ledger SELECT g, g % 50, g * 0.01, 'seed ' || g FROM generate_series(1, 3000) g`,
      );
      const name = crashMirror;
      const destination: Peer = { name: 'warehouse', kind: 'datawarehouse', config };
      const configPath = writeEngineConfig(
        harness,
        {
          name,
          sourcePeer: 'source',
          destinationPeer: 'warehouse',
          tableMappings: [tableMapping('ledger')],
          doInitialSnapshot: true,
          idleTimeoutSeconds: 1,
          maxBatchSize: 300,
          snapshotNumRowsPerPartition: 1000,
        },
        { destination },
      );
      const writer = startLedgerWriter(source.client, { firstId: 3001, pauseMs: 20 });
      // The first kill lands in the initial load; the others once CDC runs, mid-batch or between batches.
      for (let kill = 0; kill < 3; kill++) {
        const child = startEngine(name, configPath);
        try {
          if (kill > 0) await running(name);
          await new Promise((resolve) => setTimeout(resolve, 500 + Math.floor(Math.random() * 2000)));
        } finally {
          child.kill('SIGKILL');
          await exited(child);
        }
      }
      const nextId = await writer.stop();
      // Whether or not a kill landed inside a batch's transaction, leave one open
      // the way a killed engine does: named after the mirror, holding the
      // checkpoint row. The next engine must abort it, not wait on it.
      const abandoned = await openSession(config, { queryTag: 'tributary tests: abandoned' });
      // A kill may have left one already (it would block this UPDATE): that one goes first.
      await abortDetachedTransactions(abandoned, name);
      await abandoned.execute(`BEGIN TRANSACTION NAME ${transactionName(name)}`);
      await abandoned.execute(
        `UPDATE "${config.database}"."_TRIBUTARY_INTERNAL"."CHECKPOINTS" SET "UPDATED_AT" = CURRENT_TIMESTAMP() WHERE "MIRROR" = '${name}'`,
      );
      await source.client.query(
        `INSERT INTO ledger VALUES (${nextId}, 1, 1, 'after the abandoned transaction')`,
      );
      const engineProcess = startEngine(name, configPath);
      try {
        await expectSameRows(
          'ledger',
          [text('id'), text('account'), text('amount'), text('note')],
          undefined,
          120_000,
        );
      } finally {
        engineProcess.kill('SIGTERM');
        await exited(engineProcess);
        await abandoned.close().catch(() => {});
      }
    },
  );
});

// Schema changes under the default policy (apply) reach ClickHouse, Snowflake
// (the emulator) and Kafka (docs/clickhouse.md, docs/snowflake.md,
// docs/kafka.md, "Schema changes"; pipeline/schema-evolution.ts), with rows
// written before and after each change: a column added, a non-key column
// renamed, a non-key column dropped, int widened to bigint and varchar(10) to
// varchar(40). Each destination ends with the source's columns and rows
// (Kafka: a schema_change message on every partition between the shapes).
// A change the destination refuses holds its table with the reason, nothing
// made, while another table of the mirror streams on: at ClickHouse a rename
// or drop of a sorting-key column (and, before 20.4, any rename), at
// Snowflake a widening SET DATA TYPE cannot make. Then the source table is
// renamed: followed into the same destination table (topic), nothing altered
// there. Under `schemaChanges: hold` a change holds its table, its destination
// as it was, while another table streams on, until a resync accepts it (Kafka:
// a schema_change message, then the rows again as snapshot messages); under
// `ignore` a rename, a drop and an add leave the old columns, null in new
// rows, beside the new ones (Kafka: a mark of the columns added only).
// test/e2e/schema-changes.test.ts is the PostgreSQL destination's.
import { type ClickHouseClient, ClickHouseLogLevel, createClient } from '@clickhouse/client';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClickHouseDestination } from '../../engine/src/connectors/clickhouse/destination.ts';
import { KafkaDestination } from '../../engine/src/connectors/kafka/destination.ts';
import { SnowflakeDestination } from '../../engine/src/connectors/snowflake/destination.ts';
import { mirrorSpecSchema } from '../../engine/src/resources/mirror.ts';
import {
  createTopics,
  deleteTopics,
  kafkaClient,
  randomTopic,
  streamConfig,
  TopicCollector,
} from '../integration/kafka-support.ts';
import { clickhouseEngines } from '../support/clickhouse-engines.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import {
  clickhouseCells,
  clickhouseColumns,
  clickhouseRows,
  foldTopic,
  snowflakeCells,
  snowflakeColumns,
} from '../support/destination-readers.ts';
import { checkedJsonExample } from '../support/doc-examples.ts';
import {
  createHarness,
  type Harness,
  type RunningMirror,
  type SpecInput,
  startMirror,
} from '../support/mirror-harness.ts';
import {
  changes,
  createShaped,
  expectEventually,
  makeChanges,
  running,
  type SourceClient,
  sourceColumns,
  sourceRows,
  stateOf,
} from '../support/shaped-table.ts';
import { emulatorConfig, SnowflakeAdmin, uniqueName } from '../support/snowflake-peer.ts';

const logger = pino({ level: process.env.TRIBUTARY_TEST_LOG ?? 'silent' });

type Client = SourceClient;

/** A small table for the policy tests: `(id int PRIMARY KEY, v text, x int)`, 50 rows. */
async function createSmall(client: Client, table: string): Promise<void> {
  await client.query(`CREATE TABLE ${table} (id int PRIMARY KEY, v text, x int)`);
  await client.query(`INSERT INTO ${table} SELECT g, 'v' || g, g FROM generate_series(1, 50) g`);
}

/** How a column is changed under hold: renamed where the destination can rename, else added. */
const heldChanges = {
  rename: { ddl: 'RENAME COLUMN v TO w', described: 'column v renamed to w', rows: `w = 'after the change'` },
  add: { ddl: 'ADD COLUMN y int', described: 'column y added', rows: `y = id` },
} as const;

/** Changes `policy_held` under hold, with rows after the change, and waits until it is held for it. */
async function changeAndExpectHeld(
  harness: Harness,
  mirror: string,
  change: (typeof heldChanges)[keyof typeof heldChanges],
): Promise<void> {
  await harness.source.client.query(`ALTER TABLE policy_held ${change.ddl}`);
  await harness.source.client.query(`UPDATE policy_held SET ${change.rows} WHERE id <= 10`);
  const table = 'public.policy_held';
  await waitFor(
    async () => (await stateOf(harness, mirror, table))?.state === 'held',
    60_000,
    `${table} held`,
  );
  expect((await stateOf(harness, mirror, table))?.problem?.message).toBe(
    `schema change of ${table} held (schemaChanges: hold): ${change.described}`,
  );
}

/** Under ignore: v renamed to w, x dropped and y added, then a row inserted and one updated. */
async function changeIgnored(client: Client): Promise<void> {
  await client.query(`ALTER TABLE policy_ignored RENAME COLUMN v TO w`);
  await client.query(`ALTER TABLE policy_ignored DROP COLUMN x, ADD COLUMN y int`);
  await client.query(`INSERT INTO policy_ignored VALUES (100, 'new', 7)`);
  await client.query(`UPDATE policy_ignored SET w = 'updated' WHERE id = 1`);
}

/** Stops the mirror and starts it again with a resync that accepts the held change of `table`, until it streams. */
async function acceptHeld(
  harness: Harness,
  running: RunningMirror,
  input: SpecInput,
  table: string,
  start: (input: SpecInput) => RunningMirror,
): Promise<RunningMirror> {
  await running.stop();
  const accepting = start({ ...input, resyncTables: { [table]: 'accept-1' } });
  await waitFor(
    async () => (await stateOf(harness, input.name, table))?.state === 'streaming',
    120_000,
    `${table} accepted and loaded again`,
  );
  return accepting;
}

/** Asserts that the table streams on after changeIgnored's changes, and that the log says what ignore left. */
async function expectIgnoredWarned(harness: Harness, mirror: string): Promise<void> {
  expect((await stateOf(harness, mirror, 'public.policy_ignored'))?.state).toBe('streaming');
  const logs = await harness.catalog.listLogs({ mirror, offset: 0, limit: 200 });
  expect(logs.entries.map((entry) => entry.message)).toContain(
    'public.policy_ignored changed at the source (column x dropped, column v renamed to w); schemaChanges: ignore leaves the destination as it is: a dropped column gets null in new rows, a renamed one is a new column beside the old, a type stays',
  );
}

/** What the policy tests read of a ClickHouse or Snowflake destination. */
interface PolicyDestination {
  /** Starts a mirror into the destination. */
  readonly start: (input: SpecInput) => RunningMirror;
  /** A table mapping of `public.<table>` into the destination. */
  readonly mapped: (table: string) => NonNullable<SpecInput['tableMappings']>[number];
  /** The destination table's column names (lower case, sorted), the mirror's own left out. */
  readonly columns: (table: string) => Promise<string[]>;
  /** The table's rows as readers see them, as text cells of `columns`, by id. */
  readonly rows: (table: string, columns: readonly string[]) => Promise<unknown[][]>;
}

/** Waits until the destination table holds the source's rows in the source's columns, then asserts it. */
async function expectSourceRows(harness: Harness, into: PolicyDestination, table: string): Promise<void> {
  const columns = await sourceColumns(harness.source.client, table);
  await expectEventually(
    () => into.rows(table, columns),
    () => sourceRows(harness.source.client, table, columns),
    `${table} rows`,
  );
}

/**
 * Under hold, a change holds its table with the change in its problem, its
 * destination as it was, while another table streams on; a resync accepts
 * it: the table ends in the source's shape with the source's rows.
 */
async function holdsUntilAccepted(
  harness: Harness,
  into: PolicyDestination,
  change: (typeof heldChanges)[keyof typeof heldChanges],
): Promise<void> {
  const { source } = harness;
  for (const table of ['policy_held', 'policy_beside']) await createSmall(source.client, table);
  const input: SpecInput = {
    name: `hold-${randomSuffix()}`,
    tableMappings: [into.mapped('policy_held'), into.mapped('policy_beside')],
    doInitialSnapshot: true,
    idleTimeoutSeconds: 1,
    schemaChanges: 'hold',
  };
  let mirror = into.start(input);
  try {
    await running(harness, input.name);
    await source.client.query(`UPDATE policy_held SET v = 'before the change' WHERE id <= 5`);
    await expectSourceRows(harness, into, 'policy_held');
    const rowsBefore = await sourceRows(source.client, 'policy_held', ['id', 'v', 'x']);
    await changeAndExpectHeld(harness, input.name, change);
    // Its destination stays at the point before the change.
    expect(await into.columns('policy_held')).toEqual(['id', 'v', 'x']);
    expect(await into.rows('policy_held', ['id', 'v', 'x'])).toEqual(rowsBefore);
    await source.client.query(`INSERT INTO policy_beside VALUES (500, 'streams on', 5)`);
    await source.client.query(`UPDATE policy_beside SET v = 'updated' WHERE id <= 3`);
    await expectSourceRows(harness, into, 'policy_beside');
    expect((await stateOf(harness, input.name, 'public.policy_beside'))?.state).toBe('streaming');

    mirror = await acceptHeld(harness, mirror, input, 'public.policy_held', into.start);
    await source.client.query(`UPDATE policy_held SET x = -x WHERE id <= 3`);
    expect(await into.columns('policy_held')).toEqual(await sourceColumns(source.client, 'policy_held'));
    await expectSourceRows(harness, into, 'policy_held');
  } finally {
    await mirror.stop().catch(() => {});
  }
}

/**
 * Under ignore, a rename, a drop and an add: the destination gains the new
 * columns and keeps the old ones, null in rows written after the change.
 */
async function ignoresAllButAdds(harness: Harness, into: PolicyDestination): Promise<void> {
  const { source } = harness;
  await createSmall(source.client, 'policy_ignored');
  const input: SpecInput = {
    name: `ignore-${randomSuffix()}`,
    tableMappings: [into.mapped('policy_ignored')],
    doInitialSnapshot: true,
    idleTimeoutSeconds: 1,
    schemaChanges: 'ignore',
  };
  const mirror = into.start(input);
  try {
    await expectSourceRows(harness, into, 'policy_ignored');
    await running(harness, input.name);
    await changeIgnored(source.client);
    const columns = ['id', 'v', 'w', 'x', 'y'];
    await expectEventually(
      () => into.rows('policy_ignored', columns),
      async () => [
        ['1', null, 'updated', null, null],
        ...Array.from({ length: 49 }, (_, index) => `${index + 2}`).map((id) => [
          id,
          `v${id}`,
          null,
          id,
          null,
        ]),
        ['100', null, 'new', null, '7'],
      ],
      'the rows written before and after the changes',
    );
    expect(await into.columns('policy_ignored')).toEqual(columns);
    await expectIgnoredWarned(harness, input.name);
  } finally {
    await mirror.stop().catch(() => {});
  }
}

describe.each(clickhouseEngines)('schema changes into ClickHouse ($name)', (engine) => {
  let harness: Harness;
  let admin: ClickHouseClient;
  const database = `tributary_schema_${randomSuffix()}`;
  const config = engine.config(database);
  const mirrors: RunningMirror[] = [];

  const start = (input: SpecInput): RunningMirror => {
    const spec = mirrorSpecSchema.parse({ ...input, sourcePeer: 's', destinationPeer: 'd' });
    const mirror = startMirror(harness, input, {
      wrapDestination: () =>
        new ClickHouseDestination(config, {
          mirror: spec.name,
          mirrorColumns: { softDeleteColumn: spec.softDeleteColName, syncedAtColumn: spec.syncedAtColName },
          tableMappings: spec.tableMappings,
          maxBatchSize: 1_000_000,
          logger,
        }),
    });
    mirrors.push(mirror);
    return mirror;
  };

  const chRows = <T>(query: string) => clickhouseRows<T>(admin, query);

  const chColumns = (table: string) => clickhouseColumns(admin, database, table);
  const chTableRows = (table: string, columns: readonly string[]) =>
    clickhouseCells(admin, database, table, columns);

  const into: PolicyDestination = {
    start,
    mapped: (table) => ({ source: { schema: 'public', table }, destination: { schema: 'public', table } }),
    columns: async (table) => (await chColumns(table)).map((column) => column.split(' ')[0] ?? column),
    rows: chTableRows,
  };
  const expectSameRows = (table: string) => expectSourceRows(harness, into, table);

  beforeAll(async () => {
    harness = await createHarness('schch');
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
    await Promise.all(mirrors.map((mirror) => mirror.stop().catch(() => {})));
    await admin?.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => {});
    await admin?.close();
    await harness?.close();
  });

  it('adds, renames, drops and widens columns, rows written before and after each', {
    timeout: 300_000,
  }, async () => {
    const { source } = harness;
    await createShaped(source.client);
    const input: SpecInput = {
      name: `schch-${randomSuffix()}`,
      tableMappings: [
        { source: { schema: 'public', table: 'shaped' }, destination: { schema: 'public', table: 'shaped' } },
      ],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const mirror = start(input);
    await expectSameRows('shaped');
    await running(harness, input.name);
    expect(await chColumns('shaped')).toEqual([
      'a Nullable(Int32)',
      'b Nullable(String)',
      'c Nullable(String)',
      'gone Nullable(String)',
      'id Int32',
      'v Nullable(String)',
    ]);
    // ClickHouse before 20.4 has no RENAME COLUMN: there the rename is held (below).
    const made = engine.modern ? changes : changes.filter((change) => !change.ddl.includes('RENAME'));
    await makeChanges(source.client, made);
    await expectEventually(
      () => chColumns('shaped'),
      async () => [
        'a Nullable(Int64)',
        'b Nullable(String)',
        ...(engine.modern ? ['c2 Nullable(String)'] : ['c Nullable(String)']),
        'e Nullable(String)',
        'id Int32',
        'v Nullable(String)',
      ],
      'the source shape',
    );
    await expectSameRows('shaped');
    expect((await stateOf(harness, input.name, 'public.shaped'))?.state).toBe('streaming');
    // The source table renamed: the same ClickHouse table goes on, unaltered.
    const columnsBefore = await chColumns('shaped');
    await source.client.query(`ALTER TABLE shaped RENAME TO shaped_moved`);
    await source.client.query(`UPDATE shaped_moved SET v = 'after the table rename' WHERE id <= 20`);
    await source.client.query(`INSERT INTO shaped_moved (id, v) VALUES (5000, 'renamed')`);
    const movedColumns = await sourceColumns(source.client, 'shaped_moved');
    await expectEventually(
      () => chTableRows('shaped', movedColumns),
      () => sourceRows(source.client, 'shaped_moved', movedColumns),
      'shaped rows after the table rename',
    );
    expect(await chColumns('shaped')).toEqual(columnsBefore);
    expect((await stateOf(harness, input.name, 'public.shaped'))?.state).toBe('streaming');
    if (!engine.modern) {
      await source.client.query(`ALTER TABLE shaped_moved RENAME COLUMN c TO c2`);
      await source.client.query(`UPDATE shaped_moved SET c2 = 'renamed' WHERE id = 1`);
      await waitFor(
        async () => (await stateOf(harness, input.name, 'public.shaped'))?.state === 'held',
        60_000,
        'held',
      );
      expect((await stateOf(harness, input.name, 'public.shaped'))?.problem?.message).toBe(
        'schema change of public.shaped held: ClickHouse 18.16 cannot rename columns (20.4 can) (column c renamed to c2)',
      );
      expect(await chColumns('shaped')).toContain('c Nullable(String)');
    }
    await mirror.stop();
  });

  it('holds a rename or drop of a sorting-key column with the reason while another table streams on', {
    timeout: 300_000,
  }, async () => {
    const { source } = harness;
    for (const table of ['ranked', 'keyed', 'other']) {
      await source.client.query(`CREATE TABLE ${table} (id int PRIMARY KEY, k int, v text)`);
      await source.client.query(
        `INSERT INTO ${table} SELECT g, g % 7, 'v' || g FROM generate_series(1, 100) g`,
      );
    }
    const mapped = (table: string) => ({
      source: { schema: 'public', table },
      destination: { schema: 'public', table },
    });
    const input: SpecInput = {
      name: `schch-held-${randomSuffix()}`,
      tableMappings: [
        // k is ranked into the sorting key: ORDER BY (k, id).
        { ...mapped('ranked'), columns: [{ sourceName: 'k', ordering: 1 }] },
        mapped('keyed'),
        mapped('other'),
      ],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const mirror = start(input);
    for (const table of ['ranked', 'keyed', 'other']) await expectSameRows(table);
    await running(harness, input.name);
    const [sorting] = await chRows<{ sorting_key: string }>(
      `SELECT sorting_key FROM system.tables WHERE database = '${database}' AND name = 'ranked'`,
    ).catch(() => [{ sorting_key: 'k, id' }]); // 18.16's system.tables has no sorting_key
    expect(sorting?.sorting_key).toBe('k, id');

    await source.client.query(`UPDATE ranked SET v = 'before' WHERE id <= 5`);
    await source.client.query(`ALTER TABLE ranked DROP COLUMN k`);
    await source.client.query(`UPDATE ranked SET v = 'after' WHERE id <= 10`);
    await source.client.query(`UPDATE keyed SET v = 'before' WHERE id <= 5`);
    await source.client.query(`ALTER TABLE keyed RENAME COLUMN id TO id2`);
    await source.client.query(`UPDATE keyed SET v = 'after' WHERE id2 <= 10`);
    for (const table of ['ranked', 'keyed']) {
      await waitFor(
        async () => (await stateOf(harness, input.name, `public.${table}`))?.state === 'held',
        60_000,
        `${table} held`,
      );
    }
    expect((await stateOf(harness, input.name, 'public.ranked'))?.problem?.message).toBe(
      "schema change of public.ranked held: ClickHouse cannot drop k, a column of the table's sorting key (ORDER BY) (column k dropped)",
    );
    expect((await stateOf(harness, input.name, 'public.keyed'))?.problem?.message).toBe(
      "schema change of public.keyed held: ClickHouse cannot rename id, a column of the table's sorting key (ORDER BY) (column id renamed to id2)",
    );
    // Nothing made: the columns are as they were, the rows those before the change.
    // (A sorting-key column cannot be Nullable: ranked.k keeps the type's zero for NULL.)
    expect(await chColumns('ranked')).toEqual(['id Int32', 'k Int32', 'v Nullable(String)']);
    expect(await chColumns('keyed')).toEqual(['id Int32', 'k Nullable(Int32)', 'v Nullable(String)']);
    const [{ n: before } = { n: '' }] = await chRows<{ n: string }>(
      `SELECT toString(count()) AS n FROM ${database}.ranked FINAL WHERE v = 'before' AND _tributary_is_deleted = 0`,
    );
    expect(before).toBe('5');
    const [{ n: after } = { n: '' }] = await chRows<{ n: string }>(
      `SELECT toString(count()) AS n FROM ${database}.keyed FINAL WHERE v = 'after' AND _tributary_is_deleted = 0`,
    );
    expect(after).toBe('0');
    // The mirror's other table streams on.
    await source.client.query(`INSERT INTO other VALUES (500, 1, 'streams on')`);
    await source.client.query(`UPDATE other SET v = 'updated' WHERE id <= 3`);
    await expectSameRows('other');
    expect((await stateOf(harness, input.name, 'public.other'))?.state).toBe('streaming');
    await mirror.stop();

    // A resync cannot make the change in place either: the table is emptied,
    // and its load stops at the sorting key it can no longer fill (writing the
    // type's zero there would leave one row of all those sharing the rest of
    // the key). Dropped, the table is created in the source's shape and loaded.
    const resync = (token: string) =>
      start({ ...input, resyncTables: { 'public.ranked': token, 'public.keyed': token } });
    let resynced = resync('accept-1');
    for (const [table, lost] of [
      ['ranked', 'k'],
      ['keyed', 'id'],
    ] as const) {
      await waitFor(
        async () => (await stateOf(harness, input.name, `public.${table}`))?.state === 'errored',
        120_000,
        `${table} stopped at its load`,
      );
      expect((await stateOf(harness, input.name, `public.${table}`))?.problem?.message).toBe(
        `destination table ${database}.${table} is ordered by ${lost}, which public.${table} no longer has; ClickHouse cannot change a table's sorting key: drop ${database}.${table} so that the mirror creates it in the source's shape, then resync the table`,
      );
    }
    await resynced.stop();
    for (const table of ['ranked', 'keyed'])
      await admin.command({ query: `DROP TABLE ${database}.${table}` });
    resynced = resync('accept-2');
    for (const table of ['ranked', 'keyed']) {
      await waitFor(
        async () => (await stateOf(harness, input.name, `public.${table}`))?.state === 'streaming',
        120_000,
        `${table} loaded in the source's shape`,
      );
    }
    await source.client.query(`UPDATE ranked SET v = 'streamed' WHERE id <= 3`);
    await source.client.query(`UPDATE keyed SET v = 'streamed' WHERE id2 <= 3`);
    expect(await chColumns('ranked')).toEqual(['id Int32', 'v Nullable(String)']);
    expect(await chColumns('keyed')).toEqual(['id2 Int32', 'k Nullable(Int32)', 'v Nullable(String)']);
    await expectSameRows('ranked');
    const keyedColumns = ['c0', 'c1', 'c2'];
    await expectEventually(
      async () =>
        (
          await chRows<Record<string, string | null>>(
            `SELECT toString(id2) AS c0, toString(k) AS c1, v AS c2 FROM ${database}.keyed FINAL WHERE _tributary_is_deleted = 0 ORDER BY id2`,
          )
        ).map((row) => keyedColumns.map((column) => row[column] ?? null)),
      async () =>
        (
          await harness.source.client.query<unknown[]>({
            text: `SELECT id2::text, k::text, v FROM keyed ORDER BY keyed.id2`,
            rowMode: 'array',
          })
        ).rows,
      'keyed rows',
    );
    await resynced.stop();
  });

  it('under hold, holds a changed table while another streams on, and a resync accepts the change', {
    timeout: 300_000,
  }, async () => {
    // 18.16 cannot rename a column: a resync could not make that change there.
    await holdsUntilAccepted(harness, into, engine.modern ? heldChanges.rename : heldChanges.add);
  });

  it('under ignore, adds the columns added or renamed and keeps the old ones, null in new rows', {
    timeout: 300_000,
  }, async () => {
    await ignoresAllButAdds(harness, into);
  });
});

describe('schema changes into Snowflake (emulator)', () => {
  const config = emulatorConfig(uniqueName('SCHEMA'));
  const schema = `trib_schema_${randomSuffix()}`.toLowerCase();
  let harness: Harness;
  let admin: SnowflakeAdmin;

  beforeAll(async () => {
    harness = await createHarness('schsf');
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

  const where = (table: string) => ({ database: config.database, schema: schema.toUpperCase(), table });
  const sfColumns = (table = 'SHAPED') => snowflakeColumns(admin, where(table));
  const sfRows = (columns: readonly string[], table = 'SHAPED') =>
    snowflakeCells(admin, where(table), columns);

  const start = (input: SpecInput) =>
    startMirror(harness, input, {
      wrapDestination: () =>
        new SnowflakeDestination(config, { mirror: input.name, mirrorColumns: {}, logger }),
    });
  const into: PolicyDestination = {
    start,
    mapped: (table) => ({ source: { schema: 'public', table }, destination: { schema, table } }),
    columns: async (table) =>
      (await sfColumns(table.toUpperCase())).map((column) => (column.split(' ')[0] ?? column).toLowerCase()),
    rows: (table, columns) => sfRows(columns, table.toUpperCase()),
  };

  it('adds, renames, drops and widens columns, rows written before and after each', {
    timeout: 300_000,
  }, async () => {
    const { source } = harness;
    await createShaped(source.client);
    const input: SpecInput = {
      name: `schsf-${randomSuffix()}`,
      tableMappings: [
        { source: { schema: 'public', table: 'shaped' }, destination: { schema, table: 'shaped' } },
      ],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const mirror = start(input);
    try {
      const sameRows = async () => {
        const columns = await sourceColumns(source.client, 'shaped');
        await expectEventually(
          () => sfRows(columns),
          () => sourceRows(source.client, 'shaped', columns),
          'shaped rows',
        );
      };
      await sameRows();
      await running(harness, input.name);
      expect(await sfColumns()).toEqual([
        'A NUMBER(10)',
        'B TEXT',
        'C TEXT',
        'GONE TEXT',
        'ID NUMBER(10)',
        'V TEXT',
      ]);
      await makeChanges(source.client);
      // varchar(n) is VARCHAR at Snowflake whatever n: widening it changes nothing there.
      await expectEventually(
        () => sfColumns(),
        async () => ['A NUMBER(19)', 'B TEXT', 'C2 TEXT', 'E TEXT', 'ID NUMBER(10)', 'V TEXT'],
        'the source shape',
      );
      expect((await sfColumns()).map((column) => column.split(' ')[0])).toEqual(
        (await sourceColumns(source.client, 'shaped')).map((name) => name.toUpperCase()),
      );
      await sameRows();
      expect((await stateOf(harness, input.name, 'public.shaped'))?.state).toBe('streaming');
      // The source table renamed: the same Snowflake table goes on, unaltered.
      const columnsBefore = await sfColumns();
      await source.client.query(`ALTER TABLE shaped RENAME TO shaped_moved`);
      await source.client.query(`UPDATE shaped_moved SET v = 'after the table rename' WHERE id <= 20`);
      await source.client.query(`INSERT INTO shaped_moved (id, v) VALUES (5000, 'renamed')`);
      const movedColumns = await sourceColumns(source.client, 'shaped_moved');
      await expectEventually(
        () => sfRows(movedColumns),
        () => sourceRows(source.client, 'shaped_moved', movedColumns),
        'shaped rows after the table rename',
      );
      expect(await sfColumns()).toEqual(columnsBefore);
      expect((await stateOf(harness, input.name, 'public.shaped'))?.state).toBe('streaming');
    } finally {
      await mirror.stop().catch(() => {});
    }
  });
  it('holds a widening SET DATA TYPE cannot make (a NUMBER of another scale) while another table streams on', {
    timeout: 300_000,
  }, async () => {
    const { source } = harness;
    for (const table of ['retyped', 'beside']) {
      await source.client.query(`CREATE TABLE ${table} (id int PRIMARY KEY, n int)`);
      await source.client.query(`INSERT INTO ${table} SELECT g, g FROM generate_series(1, 50) g`);
    }
    const mapped = (table: string) => ({
      source: { schema: 'public', table },
      destination: { schema, table },
    });
    const input: SpecInput = {
      name: `schsf-held-${randomSuffix()}`,
      tableMappings: [mapped('retyped'), mapped('beside')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const mirror = start(input);
    try {
      await running(harness, input.name);
      // int to numeric(14,2) widens at the source; at Snowflake it is NUMBER(10,0) to NUMBER(14,2).
      await source.client.query(`ALTER TABLE retyped ALTER COLUMN n TYPE numeric(14,2)`);
      await source.client.query(`UPDATE retyped SET n = n + 0.5 WHERE id <= 5`);
      await waitFor(
        async () => (await stateOf(harness, input.name, 'public.retyped'))?.state === 'held',
        60_000,
        'held',
      );
      expect((await stateOf(harness, input.name, 'public.retyped'))?.problem?.message).toBe(
        'schema change of public.retyped held: Snowflake cannot change n from NUMBER(10,0) to NUMBER(14,2) (ALTER COLUMN … SET DATA TYPE widens a NUMBER of the same scale or a VARCHAR only) (column n changed type)',
      );
      expect(await sfColumns('RETYPED')).toEqual(['ID NUMBER(10)', 'N NUMBER(10)']);
      await source.client.query(`UPDATE beside SET n = -n WHERE id <= 10`);
      await expectEventually(
        () => sfRows(['id', 'n'], 'BESIDE'),
        () => sourceRows(source.client, 'beside', ['id', 'n']),
        'beside rows',
      );
      expect((await stateOf(harness, input.name, 'public.beside'))?.state).toBe('streaming');
    } finally {
      await mirror.stop().catch(() => {});
    }
  });

  it('under hold, holds a changed table while another streams on, and a resync accepts the change', {
    timeout: 300_000,
  }, async () => {
    await holdsUntilAccepted(harness, into, heldChanges.rename);
  });

  it('under ignore, adds the columns added or renamed and keeps the old ones, null in new rows', {
    timeout: 300_000,
  }, async () => {
    await ignoresAllButAdds(harness, into);
  });
});

describe('schema changes into Kafka', () => {
  const client = kafkaClient('PLAINTEXT');
  const topic = randomTopic('shaped');
  const heldTopic = randomTopic('held');
  const besideTopic = randomTopic('beside');
  const ignoredTopic = randomTopic('ignored');
  const topics = [topic, heldTopic, besideTopic, ignoredTopic];
  const partitions = 3;
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness('schk');
    await createTopics(client, topics, partitions);
  });

  afterAll(async () => {
    await deleteTopics(client, topics).catch(() => {});
    await harness?.close();
  });

  const start = (input: SpecInput) =>
    startMirror(harness, input, {
      wrapDestination: () =>
        new KafkaDestination(streamConfig('PLAINTEXT', 'StickyKey'), { mirror: input.name, logger }),
    });
  /** A mapping of `public.<table>` to a topic. */
  const mapped = (table: string, to: string) => ({
    source: { schema: 'public', table },
    destination: { schema: 'public', table: to },
  });
  /** The messages of a topic received so far, by partition and offset, values parsed. */
  const messagesOf = (collector: TopicCollector, of: string) =>
    collector.messages
      .filter((message) => message.topic === of)
      .sort((x, y) => x.partition - y.partition || x.offset - y.offset)
      .map((message) => ({ message, value: JSON.parse(message.value ?? 'null') }));
  type Decoded = ReturnType<typeof messagesOf>[number];
  /** The members of a row message's `new`, in the order sent. */
  const membersOf = ({ value }: Decoded) => Object.keys(value.new ?? {});
  /** Each partition's messages, split at its one schema_change message: before it, it, after it. */
  const splitAtMark = (messages: readonly Decoded[]) =>
    Array.from({ length: partitions }, (_, partition) => {
      const of = messages.filter(({ message }) => message.partition === partition);
      const marks = of.filter(({ value }) => value.kind === 'schema_change');
      expect(marks.length, `schema_change messages at partition ${partition}`).toBe(1);
      const at = of.findIndex(({ value }) => value.kind === 'schema_change');
      return { before: of.slice(0, at), mark: of[at], after: of.slice(at + 1) };
    });
  /** A schema_change message's value for a table of these tests, all but its changes and columns. */
  const markOf = (table: string, target: string) => ({
    kind: 'schema_change',
    source: { schema: 'public', table },
    target,
    lsn: null,
    commit_time: null,
    xid: null,
    old: null,
    new: null,
  });

  it('marks each change with a schema_change message on every partition between the old and new shapes', {
    timeout: 300_000,
  }, async () => {
    const { source } = harness;
    await createShaped(source.client);
    const initial = await sourceColumns(source.client, 'shaped');
    const input: SpecInput = {
      name: `schk-${randomSuffix()}`,
      tableMappings: [
        { source: { schema: 'public', table: 'shaped' }, destination: { schema: 'public', table: topic } },
      ],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const mirror = start(input);
    const collector = new TopicCollector(client);
    try {
      await running(harness, input.name);
      await makeChanges(source.client);
      // Two changes with no row between them: one Relation message, one mark.
      await source.client.query(`ALTER TABLE shaped ADD COLUMN f int`);
      await source.client.query(`ALTER TABLE shaped RENAME COLUMN e TO e2`);
      await source.client.query(`UPDATE shaped SET f = id WHERE id <= 90`);
      await source.client.query(`DELETE FROM shaped WHERE id = 2`);
      const final = await sourceColumns(source.client, 'shaped');
      await collector.start([topic]);
      const decoded = () =>
        collector.messages.map((message) => ({ message, value: JSON.parse(message.value ?? 'null') }));
      const marks = () => decoded().filter(({ value }) => value.kind === 'schema_change');
      await collector.until(
        () => marks().length >= (changes.length + 1) * partitions && collector.messages.length >= 300 + 5,
        120_000,
        'every schema_change message',
      );

      // Folded by key as a consumer does, the topic holds the source's rows under the new names.
      const expected = await sourceRows(source.client, 'shaped', final);
      const fold = async () => foldTopic(decoded(), final);
      await expectEventually(fold, async () => expected, 'the folded topic');

      // Each partition: the changes in order, each once at least, and every
      // row message between two of them carries the shape the first one says.
      const described = [
        [{ change: 'add', column: 'e', type: 'text' }],
        [{ change: 'rename', column: 'c', to: 'c2' }],
        [{ change: 'drop', column: 'gone' }],
        [{ change: 'retype', column: 'a', from: 'integer', type: 'bigint' }],
        [{ change: 'retype', column: 'b', from: 'character varying(10)', type: 'character varying(40)' }],
        [
          { change: 'rename', column: 'e', to: 'e2' },
          { change: 'add', column: 'f', type: 'integer' },
        ],
      ];
      for (let partition = 0; partition < partitions; partition++) {
        const messages = decoded()
          .filter(({ message }) => message.partition === partition)
          .sort((x, y) => x.message.offset - y.message.offset);
        let shape = [...initial];
        const seen: unknown[] = [];
        let rowsBetween = 0;
        const rowsPerShape: number[] = [];
        for (const { message, value } of messages) {
          if (value.kind === 'schema_change') {
            expect(message.key).toBeNull();
            const repeat = JSON.stringify(seen.at(-1)) === JSON.stringify(value.changes);
            if (!repeat) {
              seen.push(value.changes);
              rowsPerShape.push(rowsBetween);
              rowsBetween = 0;
            }
            expect(value).toMatchObject({
              source: { schema: 'public', table: 'shaped' },
              target: topic,
              lsn: null,
              commit_time: null,
              xid: null,
              old: null,
              new: null,
            });
            shape = (value.columns as { name: string }[]).map((column) => column.name).sort();
            continue;
          }
          // integer is a JSON number, bigint a string (kafka.md, "Values"): the retype changes it.
          const a = value.new?.a;
          if (a !== undefined && a !== null) {
            expect(typeof a, `a at partition ${partition} offset ${message.offset}`).toBe(
              seen.length >= 4 ? 'string' : 'number',
            );
          }
          expect(
            Object.keys(value.new ?? value.old).sort(),
            `partition ${partition} offset ${message.offset}`,
          ).toEqual(value.new ? shape : expect.arrayContaining(['id']));
          rowsBetween += 1;
        }
        rowsPerShape.push(rowsBetween);
        expect(seen).toEqual(described);
        // Rows of each shape reached this partition (the stream is not empty between the marks).
        expect(
          rowsPerShape.every((count) => count > 0),
          JSON.stringify(rowsPerShape),
        ).toBe(true);
        expect(shape).toEqual(final);
      }
      // The message docs/kafka.md shows, word for word (its target is the topic).
      const renamed = marks().find(({ value }) => value.changes[0]?.change === 'rename')?.value;
      expect(renamed).toEqual({
        ...(checkedJsonExample('docs/kafka.md', 'test/e2e/schema-changes-destinations.test.ts') as object),
        target: topic,
      });
      // The source table renamed: its changes go on to the same topic under
      // its mapped name, with no schema_change (no column changed).
      const marksBefore = marks().length;
      await source.client.query(`ALTER TABLE shaped RENAME TO shaped_moved`);
      await source.client.query(`INSERT INTO shaped_moved (id, v) VALUES (5000, 'renamed')`);
      await collector.until(
        () => decoded().some(({ value }) => value.kind !== 'schema_change' && value.new?.id === 5000),
        120_000,
        'the row written after the table rename',
      );
      expect(decoded().find(({ value }) => value.new?.id === 5000)?.value).toMatchObject({
        source: { schema: 'public', table: 'shaped' },
        new: { id: 5000, v: 'renamed' },
      });
      expect(marks().length).toBe(marksBefore);
      const last = marks().at(-1)?.value;
      expect(last?.columns).toEqual([
        { name: 'id', type: 'integer' },
        { name: 'v', type: 'text' },
        { name: 'a', type: 'bigint' },
        { name: 'b', type: 'character varying(40)' },
        { name: 'c2', type: 'text' },
        { name: 'e2', type: 'text' },
        { name: 'f', type: 'integer' },
      ]);
    } finally {
      await collector.stop().catch(() => {});
      await mirror.stop().catch(() => {});
    }
  });

  it('under hold, sends nothing of a changed table while another streams on; a resync accepts the change with a schema_change message, then the rows again as snapshot messages', {
    timeout: 300_000,
  }, async () => {
    const { source } = harness;
    for (const table of ['policy_held', 'policy_beside']) await createSmall(source.client, table);
    const input: SpecInput = {
      name: `schk-hold-${randomSuffix()}`,
      tableMappings: [mapped('policy_held', heldTopic), mapped('policy_beside', besideTopic)],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
      schemaChanges: 'hold',
    };
    const collector = new TopicCollector(client);
    let mirror = start(input);
    try {
      await collector.start([heldTopic, besideTopic]);
      await running(harness, input.name);
      await source.client.query(`UPDATE policy_held SET v = 'before the change' WHERE id <= 5`);
      await collector.until(
        () => messagesOf(collector, heldTopic).length >= 55,
        60_000,
        'the rows before the change',
      );
      await changeAndExpectHeld(harness, input.name, heldChanges.rename);
      await source.client.query(`INSERT INTO policy_beside VALUES (500, 'streams on', 5)`);
      await collector.until(
        () => messagesOf(collector, besideTopic).some(({ value }) => value.new?.id === 500),
        60_000,
        'the other table streaming on',
      );
      expect((await stateOf(harness, input.name, 'public.policy_beside'))?.state).toBe('streaming');
      // Nothing of the held table after its change: no mark, no row in the new shape.
      const held = messagesOf(collector, heldTopic);
      expect(held.map(({ value }) => value.kind).sort()).toEqual([
        ...Array<string>(50).fill('snapshot'),
        ...Array<string>(5).fill('update'),
      ]);
      expect(held.every((message) => membersOf(message).join() === 'id,v,x')).toBe(true);

      // Accepted: on every partition a mark from the topic's shape to the
      // source's, then each row again as a snapshot message in the new shape,
      // then the table's changes.
      mirror = await acceptHeld(harness, mirror, input, 'public.policy_held', start);
      await source.client.query(`UPDATE policy_held SET x = -x WHERE id <= 3`);
      await collector.until(
        () => messagesOf(collector, heldTopic).length >= 55 + partitions + 50 + 3,
        120_000,
        'the marks, the rows again and the changes after the resync',
      );
      const split = splitAtMark(messagesOf(collector, heldTopic));
      for (const { before, mark, after } of split) {
        expect(before.every((message) => membersOf(message).join() === 'id,v,x')).toBe(true);
        expect(mark?.message.key).toBeNull();
        expect(mark?.value).toEqual({
          ...markOf('policy_held', heldTopic),
          changes: [{ change: 'rename', column: 'v', to: 'w' }],
          columns: [
            { name: 'id', type: 'integer' },
            { name: 'w', type: 'text' },
            { name: 'x', type: 'integer' },
          ],
        });
        expect(after.every((message) => membersOf(message).join() === 'id,w,x')).toBe(true);
        // The rows again, then the changes made after the resync.
        expect(after.map(({ value }) => value.kind).join(' ')).toMatch(/^(snapshot ?)*(update ?)*$/);
      }
      const again = split.flatMap(({ after }) => after);
      expect(
        again
          .filter(({ value }) => value.kind === 'snapshot')
          .map(({ value }) => value.new.id)
          .sort((x, y) => x - y),
      ).toEqual(Array.from({ length: 50 }, (_, index) => index + 1));
      expect(again.filter(({ value }) => value.kind === 'update').map(({ value }) => value.new.x)).toEqual(
        expect.arrayContaining([-1, -2, -3]),
      );
      // Folded by key, the rows after the marks are the source's.
      const folded = new Map(again.map(({ message, value }) => [message.key, value.new]));
      expect(
        [...folded.values()]
          .map((row) => [String(row.id), row.w, String(row.x)])
          .sort((x, y) => Number(x[0]) - Number(y[0])),
      ).toEqual(await sourceRows(source.client, 'policy_held', ['id', 'w', 'x']));
    } finally {
      await collector.stop().catch(() => {});
      await mirror.stop().catch(() => {});
    }
  });

  it('under ignore, marks the columns added (a renamed one under its new name) and sends the old ones as null', {
    timeout: 300_000,
  }, async () => {
    const { source } = harness;
    await createSmall(source.client, 'policy_ignored');
    const input: SpecInput = {
      name: `schk-ignore-${randomSuffix()}`,
      tableMappings: [mapped('policy_ignored', ignoredTopic)],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
      schemaChanges: 'ignore',
    };
    const collector = new TopicCollector(client);
    const mirror = start(input);
    try {
      await collector.start([ignoredTopic]);
      await running(harness, input.name);
      await collector.until(
        () => messagesOf(collector, ignoredTopic).length >= 50,
        60_000,
        'the initial load',
      );
      await changeIgnored(source.client);
      const rowMessage = (id: number) =>
        messagesOf(collector, ignoredTopic).find(
          ({ value }) => value.kind !== 'snapshot' && value.new?.id === id,
        );
      await collector.until(
        () => rowMessage(1) !== undefined && rowMessage(100) !== undefined,
        60_000,
        'the rows after the changes',
      );
      for (const { before, mark, after } of splitAtMark(messagesOf(collector, ignoredTopic))) {
        expect(before.every((message) => membersOf(message).join() === 'id,v,x')).toBe(true);
        expect(mark?.value).toEqual({
          ...markOf('policy_ignored', ignoredTopic),
          changes: [
            { change: 'add', column: 'w', type: 'text' },
            { change: 'add', column: 'y', type: 'integer' },
          ],
          columns: [
            { name: 'id', type: 'integer' },
            { name: 'v', type: 'text' },
            { name: 'x', type: 'integer' },
            { name: 'w', type: 'text' },
            { name: 'y', type: 'integer' },
          ],
        });
        expect(after.every((message) => membersOf(message).join() === 'id,v,x,w,y')).toBe(true);
      }
      expect(rowMessage(100)?.value).toMatchObject({
        kind: 'insert',
        new: { id: 100, v: null, x: null, w: 'new', y: 7 },
      });
      expect(rowMessage(1)?.value).toMatchObject({
        kind: 'update',
        new: { id: 1, v: null, x: null, w: 'updated', y: null },
      });
      await expectIgnoredWarned(harness, input.name);
      // A drop alone adds nothing: no mark, the column null in the rows after it.
      await source.client.query(`ALTER TABLE policy_ignored DROP COLUMN y`);
      await source.client.query(`INSERT INTO policy_ignored VALUES (101, 'after the drop')`);
      await collector.until(() => rowMessage(101) !== undefined, 60_000, 'the row after the drop');
      expect(rowMessage(101)?.value.new).toEqual({ id: 101, v: null, x: null, w: 'after the drop', y: null });
      splitAtMark(messagesOf(collector, ignoredTopic));
    } finally {
      await collector.stop().catch(() => {});
      await mirror.stop().catch(() => {});
    }
  });
});

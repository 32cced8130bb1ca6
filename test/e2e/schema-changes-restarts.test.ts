// Schema changes under apply reach ClickHouse (current and 18.16), the
// Snowflake emulator and Kafka across kill -9s of a real engine process
// (docs/engine.md, "Schema changes"; test/e2e/schema-changes.test.ts is the
// PostgreSQL destination's). Every case runs on sources 13, 15 and 18 (the
// file takes 30–45 s):
// 1. changed while no engine runs: a column added, one renamed (not on 18.16,
//    which cannot rename), one dropped, int widened to bigint, varchar(10) to
//    varchar(40), rows before and after each; the restart meets the changes in
//    the stream and the destination ends with the source's columns and rows;
// 2. killed in the middle of a change: a drop, a rename, a widening to
//    numeric and 21 adds in one transaction with its first row, one ALTER
//    statement each at ClickHouse and Snowflake; the engine is killed as soon
//    as the drop shows at the destination, so the kill lands among the
//    statements (or after them, before the shape's record in the catalog;
//    each run says which). The restart completes the change, makes nothing
//    twice (no error, the table streaming, no column left over or made
//    twice), and the rows written after it arrive.
// Kafka writes no DDL: the topic, folded by key with each schema_change mark
// applied, holds the source's rows, and on every partition the marks come in
// order (a mark repeated after a kill says the same change) between row
// messages of the shapes they announce.
import { ClickHouseLogLevel, createClient } from '@clickhouse/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Peer } from '../../engine/src/resources/peer.ts';
import {
  createTopics,
  deleteTopics,
  kafkaClient,
  randomTopic,
  streamConfig,
  TopicCollector,
} from '../integration/kafka-support.ts';
import { clickhouseEngines } from '../support/clickhouse-engines.ts';
import { ClickHouseScratch } from '../support/clickhouse-scratch.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import {
  clickhouseCells,
  clickhouseColumns,
  type DecodedMessage,
  foldTopic,
  snowflakeCells,
  snowflakeColumns,
} from '../support/destination-readers.ts';
import { exited, startEngine, writeEngineConfig } from '../support/engine-process.ts';
import { createHarness, type Harness } from '../support/mirror-harness.ts';
import {
  changes,
  createShaped,
  expectEventually,
  makeChanges,
  running,
  sourceColumns,
  sourceRows,
  stateOf,
} from '../support/shaped-table.ts';
import { emulatorConfig, SnowflakeAdmin, uniqueName } from '../support/snowflake-peer.ts';

/** A destination as the cases drive and read it. */
interface Target {
  readonly name: string;
  readonly peer: Peer;
  readonly destination: { readonly schema: string; readonly table: string };
  /** Whether it renames columns (ClickHouse 18.16 holds a rename). */
  readonly renames: boolean;
  setUp(): Promise<void>;
  tearDown(): Promise<void>;
  /** Its columns as it writes them (`name type`), the mirror's own left out. */
  shape(): Promise<string[]>;
  /** The shape it ends with after the first case, then after the second. */
  readonly shapes: { readonly changed: readonly string[]; readonly killed: readonly string[] };
  /** Its rows as text cells by id, one a source column of `columns`. */
  cells(columns: readonly string[]): Promise<unknown[][]>;
  /** Whether the second case's alteration shows there begun: e gone (its first statement), or its mark. */
  showsChangeBegun(): Promise<boolean>;
  /** What more the destination proves once both cases are done. */
  alsoProves?(): Promise<void>;
}

/**
 * The int columns the second case adds after g: at ClickHouse and Snowflake a
 * statement each, so that a kill soon after the drop lands among them.
 */
const addedInts = Array.from({ length: 20 }, (_, index) => `n${index + 1}`);

/** The second case's change, one Relation message: dropped, renamed, widened, added, in that order at the destination. */
function killedChange(renames: boolean): string {
  const renamed = renames ? 'c3' : 'c';
  return `BEGIN;
    ALTER TABLE shaped DROP COLUMN e;
    ${renames ? 'ALTER TABLE shaped RENAME COLUMN c2 TO c3;' : ''}
    ALTER TABLE shaped ALTER COLUMN a TYPE numeric(20,0);
    ALTER TABLE shaped ADD COLUMN g text, ${addedInts.map((name) => `ADD COLUMN ${name} int`).join(', ')};
    UPDATE shaped SET g = 'g' || id, ${renamed} = 'first row', n1 = id WHERE id <= 3;
    COMMIT`;
}

function restartCases(target: Target, prefix: string) {
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness(prefix);
    await target.setUp();
  });

  afterAll(async () => {
    await target.tearDown().catch(() => {});
    await harness?.close();
  });

  /** The rows first: once they arrive, the restart's setup is behind, and the shape is what it left. */
  const sameShapeAndRows = async (shape: readonly string[]) => {
    const { source } = harness;
    const columns = await sourceColumns(source.client, 'shaped');
    await expectEventually(
      () => target.cells(columns),
      () => sourceRows(source.client, 'shaped', columns),
      `${target.name} to hold the source's rows`,
    );
    await expectEventually(
      () => target.shape(),
      async () => [...shape],
      `${target.name} to take the source's shape`,
    );
  };

  it('completes the changes met after a kill -9 and makes none twice', { timeout: 600_000 }, async () => {
    const { source } = harness;
    await createShaped(source.client);
    const mirror = `${prefix}-${randomSuffix()}`;
    const config = writeEngineConfig(
      harness,
      {
        name: mirror,
        sourcePeer: 'source',
        destinationPeer: target.peer.name,
        tableMappings: [{ source: { schema: 'public', table: 'shaped' }, destination: target.destination }],
        doInitialSnapshot: true,
        idleTimeoutSeconds: 1,
      },
      { destination: target.peer },
    );
    let engine = startEngine(mirror, config);
    try {
      await running(harness, mirror);
      const initial = await sourceColumns(source.client, 'shaped');
      await expectEventually(
        () => target.cells(initial),
        () => sourceRows(source.client, 'shaped', initial),
        'the initial load',
      );

      // 1. Changed while no engine runs: the restart meets the changes in the stream.
      engine.kill('SIGKILL');
      await exited(engine);
      await makeChanges(
        source.client,
        target.renames ? changes : changes.filter((change) => !change.ddl.includes('RENAME')),
      );
      engine = startEngine(mirror, config);
      await sameShapeAndRows(target.shapes.changed);

      // 2. Killed as soon as the change shows at the destination.
      await source.client.query(killedChange(target.renames));
      await waitFor(() => target.showsChangeBegun(), 60_000, `${target.name} to show the change begun`);
      engine.kill('SIGKILL');
      await exited(engine);
      // Where the kill landed, for the record of the run (the window is the server's, not the test's).
      const whole = JSON.stringify(await target.shape()) === JSON.stringify(target.shapes.killed);
      const underWay = (await harness.catalog.listTableShapes(mirror)).get('public.shaped')?.altering;
      console.info(
        `${target.name}: the kill found ${whole ? 'all' : 'part'} of the alteration made, ${underWay ? 'recorded as under way' : 'its shape recorded'}`,
      );
      engine = startEngine(mirror, config);
      const renamed = target.renames ? 'c3' : 'c';
      await source.client.query(
        `UPDATE shaped SET g = 'g.' || id, ${renamed} = 'after the restart', a = a + 1, n1 = id, n20 = -id WHERE id <= 40`,
      );
      await source.client.query(`INSERT INTO shaped (id, v, g) VALUES (2000, 'after the restart', 'g')`);
      await source.client.query(`DELETE FROM shaped WHERE id = 7`);
      await sameShapeAndRows(target.shapes.killed);
      const table = await stateOf(harness, mirror, 'public.shaped');
      expect({ state: table?.state, problem: table?.problem }).toEqual({ state: 'streaming', problem: null });
      const errors = await harness.catalog.listLogs({ mirror, levels: ['ERROR'], offset: 0, limit: 20 });
      expect(errors.entries.map((entry) => entry.message)).toEqual([]);
      await target.alsoProves?.();
    } finally {
      engine.kill('SIGTERM');
      await exited(engine);
    }
  });
}

for (const engine of clickhouseEngines) {
  describe(`schema changes into ClickHouse (${engine.name}) across kill -9s`, () => {
    const scratch = new ClickHouseScratch(engine, 'schr');
    const { database, config } = scratch;
    const c = engine.modern ? ['c2', 'c3'] : ['c', 'c'];
    // Its reads fail until a column is there: quiet, they are polled.
    const reader = createClient({
      url: `http://${config.host}:${config.httpPort}`,
      username: config.user,
      password: config.password,
      log: { level: ClickHouseLogLevel.OFF },
    });
    restartCases(
      {
        name: engine.name,
        peer: { name: 'analytics', kind: 'analytics', config },
        destination: { schema: database, table: 'shaped' },
        renames: engine.modern,
        setUp: () => scratch.create(),
        tearDown: async () => {
          await reader.close();
          await scratch.drop();
        },
        shape: () => clickhouseColumns(reader, database, 'shaped'),
        shapes: {
          changed: [
            'a Nullable(Int64)',
            'b Nullable(String)',
            `${c[0]} Nullable(String)`,
            'e Nullable(String)',
            'id Int32',
            'v Nullable(String)',
          ],
          killed: [
            'a Nullable(Decimal(20, 0))',
            'b Nullable(String)',
            `${c[1]} Nullable(String)`,
            'g Nullable(String)',
            'id Int32',
            'v Nullable(String)',
            ...addedInts.map((name) => `${name} Nullable(Int32)`),
          ].sort(),
        },
        cells: (columns) => clickhouseCells(reader, database, 'shaped', columns),
        showsChangeBegun: async () =>
          !(await clickhouseColumns(reader, database, 'shaped')).includes('e Nullable(String)'),
      },
      'schr_ch',
    );
  });
}

describe('schema changes into Snowflake (emulator) across kill -9s', () => {
  const config = emulatorConfig(uniqueName('SCHR'));
  const schema = `trib_schr_${randomSuffix()}`.toUpperCase();
  const where = { database: config.database, schema, table: 'SHAPED' };
  let admin: SnowflakeAdmin | undefined;
  const opened = () => {
    admin ??= new SnowflakeAdmin(config);
    return admin;
  };
  restartCases(
    {
      name: 'the Snowflake emulator',
      peer: { name: 'warehouse', kind: 'datawarehouse', config },
      destination: { schema: schema.toLowerCase(), table: 'shaped' },
      renames: true,
      setUp: async () => {
        await opened().rows(`CREATE SCHEMA IF NOT EXISTS "${config.database}"."${schema}"`);
      },
      tearDown: async () => {
        await admin?.rows(`DROP SCHEMA IF EXISTS "${config.database}"."${schema}" CASCADE`).catch(() => {});
        await admin?.close();
      },
      shape: () => snowflakeColumns(opened(), where),
      shapes: {
        // varchar(n) is VARCHAR at Snowflake whatever n: widening it changes nothing there.
        changed: ['A NUMBER(19)', 'B TEXT', 'C2 TEXT', 'E TEXT', 'ID NUMBER(10)', 'V TEXT'],
        killed: [
          'A NUMBER(20)',
          'B TEXT',
          'C3 TEXT',
          'G TEXT',
          'ID NUMBER(10)',
          'V TEXT',
          ...addedInts.map((name) => `${name.toUpperCase()} NUMBER(10)`),
        ].sort(),
      },
      cells: (columns) => snowflakeCells(opened(), where, columns),
      showsChangeBegun: async () => !(await snowflakeColumns(opened(), where)).includes('E TEXT'),
    },
    'schr_sf',
  );
});

describe('schema changes into Kafka across kill -9s', () => {
  const client = kafkaClient('PLAINTEXT');
  const topic = randomTopic('schr');
  const partitions = 3;
  const collector = new TopicCollector(client);
  const decoded = (): DecodedMessage[] =>
    collector.messages.map((message) => ({ message, value: JSON.parse(message.value ?? 'null') }));
  const marks = () => decoded().filter(({ value }) => value.kind === 'schema_change');
  /** The shape the last mark of each partition says (`name type`), when every partition has one and they agree. */
  const markedShape = async () => {
    const last = Array.from({ length: partitions }, (_, partition) =>
      marks()
        .filter(({ message }) => message.partition === partition)
        .at(-1),
    );
    const shapes = new Set(
      last.map((mark) =>
        JSON.stringify((mark?.value.columns ?? []).map((column) => `${column.name} ${column.type}`)),
      ),
    );
    return shapes.size === 1 ? (JSON.parse([...shapes][0] ?? '[]') as string[]) : [...shapes];
  };
  /** The changes the marks say, in order: the first case's five, then the second's one. */
  const described = [
    [{ change: 'add', column: 'e', type: 'text' }],
    [{ change: 'rename', column: 'c', to: 'c2' }],
    [{ change: 'drop', column: 'gone' }],
    [{ change: 'retype', column: 'a', from: 'integer', type: 'bigint' }],
    [{ change: 'retype', column: 'b', from: 'character varying(10)', type: 'character varying(40)' }],
    [
      { change: 'drop', column: 'e' },
      { change: 'rename', column: 'c2', to: 'c3' },
      { change: 'retype', column: 'a', from: 'bigint', type: 'numeric(20,0)' },
      { change: 'add', column: 'g', type: 'text' },
      ...addedInts.map((name) => ({ change: 'add', column: name, type: 'integer' })),
    ],
  ];

  restartCases(
    {
      name: 'Kafka',
      peer: { name: 'kafka', kind: 'stream', config: streamConfig('PLAINTEXT', 'StickyKey') },
      destination: { schema: 'public', table: topic },
      renames: true,
      setUp: async () => {
        await createTopics(client, [topic], partitions);
        await collector.start([topic]);
      },
      tearDown: async () => {
        await collector.stop();
        await deleteTopics(client, [topic]);
      },
      // Messages are in attnum order: the shape is the source's order, not by name.
      shape: markedShape,
      shapes: {
        changed: ['id integer', 'v text', 'a bigint', 'b character varying(40)', 'c2 text', 'e text'],
        killed: [
          'id integer',
          'v text',
          'a numeric(20,0)',
          'b character varying(40)',
          'c3 text',
          'g text',
          ...addedInts.map((name) => `${name} integer`),
        ],
      },
      cells: async (columns) => foldTopic(decoded(), columns),
      showsChangeBegun: async () =>
        // The mark that brings g, whatever it says (other than e's drop fails the comparison below).
        marks().some(({ value }) =>
          value.changes?.some((change) => change.column === 'g' || change.to === 'g'),
        ),
      async alsoProves() {
        const initial = ['a', 'b', 'c', 'gone', 'id', 'v'];
        for (let partition = 0; partition < partitions; partition++) {
          const messages = decoded()
            .filter(({ message }) => message.partition === partition)
            .sort((x, y) => x.message.offset - y.message.offset);
          let shape = initial;
          const seen: unknown[] = [];
          const misshapen: string[] = [];
          for (const { message, value } of messages) {
            if (value.kind === 'schema_change') {
              // A repeat says the change the mark before it said (delivery is at least once).
              if (JSON.stringify(seen.at(-1)) !== JSON.stringify(value.changes)) seen.push(value.changes);
              shape = (value.columns ?? []).map((column) => column.name).sort();
              continue;
            }
            const columns = Object.keys(value.new ?? {}).sort();
            if (value.new && JSON.stringify(columns) !== JSON.stringify(shape))
              misshapen.push(`offset ${message.offset}: ${columns.join(',')} under ${shape.join(',')}`);
          }
          expect({ partition, seen, misshapen }).toEqual({ partition, seen: described, misshapen: [] });
        }
      },
    },
    'schr_k',
  );
});

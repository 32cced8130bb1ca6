import { describe, expect, it } from 'vitest';
import { idTextTable } from '../../../test/support/id-text-table.ts';
import type { TableShape } from '../catalog/catalog.ts';
import type { RelationMessage } from '../connectors/changes.ts';
import { MemoryDestination } from '../connectors/memory/destination.ts';
import type { SchemaChangePolicy, TableName } from '../resources/mirror.ts';
import { HeldSchemaChange, SchemaEvolution } from './schema-evolution.ts';

const int8 = 20;
const text = 25;
const table = idTextTable('t');
const relation = (columns: RelationMessage['columns'], relationId = 1, name = 't'): RelationMessage => ({
  tag: 'relation',
  relationId,
  schema: 'public',
  name,
  replicaIdentity: 'default',
  columns,
});
const id = { name: 'id', typeOid: int8, typeModifier: -1, isKey: true };
const v = { name: 'v', typeOid: text, typeModifier: -1, isKey: false };

/** attnums of the test table: id 1, v 2; a column added later gets the next. */
async function evolutionOver(
  partitionAncestors: Record<number, readonly TableName[]> = {},
  options: {
    schemaChanges?: SchemaChangePolicy;
    live?: { attnum: number; name: string }[];
    /** The table's identity as its recorded shape holds it. */
    sourceOid?: number;
  } = {},
) {
  const destination = new MemoryDestination();
  const attnumbered = {
    ...table,
    columns: table.columns.map((column, index) => ({ ...column, attnum: index + 1 })),
  };
  await destination.setupTables([attnumbered]);
  const steps: string[] = [];
  const recorded: string[][] = [];
  const recordedShapes: TableShape[] = [];
  /** The records and alterations in the order they were made. */
  const writes: string[] = [];
  /** The transaction each read of the live columns waited for. */
  const liveReadAfter: number[] = [];
  const shapes =
    options.sourceOid === undefined
      ? undefined
      : new Map<string, TableShape>([
          [
            'public.t',
            {
              source: attnumbered.columns.map(({ name, typeOid, typeModifier, attnum }) => ({
                name,
                typeOid,
                typeModifier,
                attnum,
              })),
              columns: attnumbered.columns,
              keyColumns: attnumbered.keyColumns,
              sourceOid: options.sourceOid,
            },
          ],
        ]);
  const schema = new SchemaEvolution({
    shapes,
    renamed: (mapped, current) => {
      steps.push(`renamed ${mapped.table} to ${current.schema}.${current.table}`);
    },
    destination: {
      refuseAlteration: async ({ changes }) =>
        changes.some((change) => change.kind === 'drop' && change.name === 'id') ? 'no' : undefined,
      alterColumns: async (alteration) => {
        steps.push(`alter ${alteration.changes.map((change) => change.kind).join(', ')}`);
        writes.push('alter');
        await destination.alterColumns(alteration);
      },
    },
    schemaChanges: options.schemaChanges,
    tableMappings: [{ source: table.source, destination: table.destination, exclude: [], columns: [] }],
    tables: [attnumbered],
    typeNames: async (columns) => {
      steps.push(`look up ${columns.map((column) => column.typeOid).join(', ')}`);
      return columns.map((column) =>
        column.typeOid === 21 ? 'smallint' : column.typeOid === 20 ? 'bigint' : 'text',
      );
    },
    liveColumns: async (_relationId, afterXid) => {
      liveReadAfter.push(afterXid);
      return (
        options.live ?? [
          { attnum: 1, name: 'id' },
          { attnum: 2, name: 'v' },
        ]
      );
    },
    partitionAncestors: async (relationId) => partitionAncestors[relationId] ?? [],
    publication: { name: 'pub', createdByMirror: true },
    log: async (level, message) => {
      steps.push(`${level} ${message}`);
    },
    beforeChange: async (changed) => {
      steps.push(`before ${changed.source.table}`);
    },
    recordShape: async (_table, shape) => {
      recorded.push(shape.columns.map((column) => column.name));
      recordedShapes.push(shape);
      writes.push(shape.altering ? 'record under way' : 'record');
    },
  });
  return { schema, steps, destination, recorded, recordedShapes, writes, liveReadAfter };
}

const w = { name: 'w', typeOid: 21, typeModifier: -1, isKey: false };
/** The transaction of the change each settle is for. */
const xid = 731;

describe('SchemaEvolution', () => {
  it('tracks a mapped relation without waiting when its shape is the table’s', async () => {
    const { schema, steps } = await evolutionOver();
    schema.observe(relation([id, v]));
    expect(schema.needsSettling(1)).toBe(false);
    expect(schema.relations.tableOf(1)?.keepsTupleOrder).toBe(true);
    expect(schema.needsResolving(1)).toBe(false);
    expect(steps).toEqual([]);
  });

  it('adds a column at the first change after it, once the old shape is written, and records it', async () => {
    const { schema, steps, destination, recorded, liveReadAfter } = await evolutionOver(
      {},
      {
        live: [
          { attnum: 1, name: 'id' },
          { attnum: 2, name: 'v' },
          { attnum: 3, name: 'w' },
        ],
      },
    );
    schema.observe(relation([id, v, w]));
    expect(schema.needsSettling(1)).toBe(true);
    expect(steps).toEqual([]);
    await schema.settle(1, xid);
    expect(steps).toEqual([
      'look up 21',
      'before t',
      'alter add',
      'INFO public.t follows its schema change at the destination: column w added',
    ]);
    expect(destination.columns('public.t')).toEqual(['id', 'v', 'w']);
    expect(schema.relations.tableOf(1)?.table.columns.map((column) => column.name)).toEqual(['id', 'v', 'w']);
    expect(schema.relations.followedSource(schema.relations.tables[0] ?? table).map((c) => c.attnum)).toEqual(
      [1, 2, 3],
    );
    expect(recorded).toEqual([
      ['id', 'v'],
      ['id', 'v', 'w'],
    ]);
    // The catalog is read once the change's transaction is visible there.
    expect(liveReadAfter).toEqual([xid]);
    expect(schema.needsSettling(1)).toBe(false);
  });

  it('records the alteration as under way before its first statement, and the shape it makes after it', async () => {
    const { schema, recordedShapes, writes } = await evolutionOver(
      {},
      {
        live: [
          { attnum: 1, name: 'id' },
          { attnum: 3, name: 'w' },
        ],
      },
    );
    schema.observe(relation([id, w]));
    await schema.settle(1, xid);
    expect(writes).toEqual(['record under way', 'alter', 'record']);
    const [underWay, made] = recordedShapes;
    // The shape the destination has until the alteration is done, and what it is to make.
    expect(underWay?.columns.map((column) => column.name)).toEqual(['id', 'v']);
    expect(underWay?.altering?.changes.map((change) => change.kind)).toEqual(['drop', 'add']);
    expect(underWay?.altering?.to).toEqual(made);
    expect(made?.columns.map((column) => column.name)).toEqual(['id', 'w']);
    expect(made?.altering).toBeUndefined();
  });

  it('renames a column whose attnum is still alive, and drops one whose attnum is gone', async () => {
    const renamed = await evolutionOver(
      {},
      {
        live: [
          { attnum: 1, name: 'id' },
          { attnum: 2, name: 'x' },
        ],
      },
    );
    renamed.schema.observe(relation([id, { ...v, name: 'x' }]));
    await renamed.schema.settle(1, xid);
    expect(renamed.destination.columns('public.t')).toEqual(['id', 'x']);
    expect(renamed.steps).toContain(
      'INFO public.t follows its schema change at the destination: column v renamed to x',
    );

    const dropped = await evolutionOver(
      {},
      {
        live: [
          { attnum: 1, name: 'id' },
          { attnum: 3, name: 'x' },
        ],
      },
    );
    dropped.schema.observe(relation([id, { ...v, name: 'x' }]));
    await dropped.schema.settle(1, xid);
    expect(dropped.steps).toContain(
      'INFO public.t follows its schema change at the destination: column v dropped, column x added',
    );
  });

  it('widens a type, and holds the table on a narrowing with nothing made', async () => {
    const widened = await evolutionOver();
    widened.schema.observe(relation([id, { ...v, typeOid: 20 }]));
    await expect(widened.schema.settle(1, xid)).rejects.toBeInstanceOf(HeldSchemaChange);
    expect(widened.steps.filter((step) => step.startsWith('alter'))).toEqual([]);

    const { schema, destination } = await evolutionOver();
    schema.observe(relation([{ ...id, typeOid: 21 }, v]));
    const held = await schema.settle(1, xid).catch((error: unknown) => error);
    expect(held).toBeInstanceOf(HeldSchemaChange);
    expect(String(held)).toMatch(/id changed from bigint to smallint, which does not widen it/);
    expect(destination.columns('public.t')).toEqual(['id', 'v']);
  });

  it('holds a table the destination refuses to alter, and every change under hold', async () => {
    const refused = await evolutionOver({}, { live: [{ attnum: 2, name: 'v' }] });
    refused.schema.observe(relation([v]));
    await expect(refused.schema.settle(1, xid)).rejects.toThrow(/held: no \(column id dropped\)/);

    const holding = await evolutionOver(
      {},
      {
        schemaChanges: 'hold',
        live: [
          { attnum: 1, name: 'id' },
          { attnum: 2, name: 'x' },
        ],
      },
    );
    holding.schema.observe(relation([id, { ...v, name: 'x' }]));
    await expect(holding.schema.settle(1, xid)).rejects.toThrow(
      'schema change of public.t held (schemaChanges: hold): column v renamed to x',
    );
    expect(holding.steps).toEqual(['before t']);
  });

  it('under ignore adds columns and leaves drops, renames and types as they are, and says so', async () => {
    const { schema, steps, destination } = await evolutionOver(
      {},
      {
        schemaChanges: 'ignore',
        live: [
          { attnum: 1, name: 'id' },
          { attnum: 2, name: 'x' },
        ],
      },
    );
    schema.observe(
      relation([
        { ...id, typeOid: 23 },
        { ...v, name: 'x' },
      ]),
    );
    await schema.settle(1, xid);
    expect(destination.columns('public.t')).toEqual(['id', 'v', 'x']);
    expect(steps.at(-1)).toMatch(
      /^WARN public.t changed at the source \(column v renamed to x, column id changed type\); schemaChanges: ignore leaves/,
    );
  });

  it('follows a partition sent under its own name as its mapped table, and refuses its truncate', async () => {
    const { schema, steps } = await evolutionOver({ 7: [table.source] });
    schema.observe(relation([v, id], 7, 't_p1'));
    expect(schema.needsResolving(7)).toBe(true);
    await schema.resolve([7]);
    expect(schema.needsResolving(7)).toBe(false);
    const tracked = schema.relations.tableOf(7);
    expect(tracked?.projection).toEqual([1, 0]);
    expect(steps).toEqual([
      'INFO changes of partition public.t_p1 arrive under its own name (publication pub does not publish via the partition root): they are applied as public.t',
    ]);
    if (!tracked) throw new Error('not followed');
    expect(() => schema.checkTruncate(7, tracked)).toThrow(/publish_via_partition_root = true/);
  });

  it('skips the changes of a relation it does not map, deciding once', async () => {
    const { schema, steps } = await evolutionOver();
    schema.observe(relation([id], 9, 'other'));
    await schema.resolve([9, 9]);
    expect(schema.needsResolving(9)).toBe(false);
    expect(schema.relations.tableOf(9)).toBeUndefined();
    expect(steps).toHaveLength(1);
  });
});

describe('SchemaEvolution of a table renamed at the source', () => {
  it('follows the table by its identity under apply: nothing changes at the destination, the new name is recorded', async () => {
    const { schema, steps, destination, recordedShapes } = await evolutionOver({}, { sourceOid: 1 });
    schema.observe(relation([id, v], 1, 't_renamed'));
    expect(schema.relations.tableOf(1)?.table.destination.table).toBe('t');
    expect(schema.needsResolving(1)).toBe(false);
    expect(schema.needsSettling(1)).toBe(true);
    await schema.settle(1, xid);
    expect(steps).toEqual(['renamed t to public.t_renamed']);
    expect(destination.columns('public.t')).toEqual(['id', 'v']);
    expect(recordedShapes.map((shape) => [shape.sourceOid, shape.sourceName])).toEqual([
      [1, 'public.t_renamed'],
    ]);
    // The next Relation message of that name is the shape followed.
    schema.observe(relation([id, v], 1, 't_renamed'));
    expect(schema.needsSettling(1)).toBe(false);
  });

  it('follows a rename and a column change of one Relation message together', async () => {
    const { schema, steps, destination } = await evolutionOver(
      {},
      {
        sourceOid: 1,
        live: [
          { attnum: 1, name: 'id' },
          { attnum: 2, name: 'v' },
          { attnum: 3, name: 'w' },
        ],
      },
    );
    schema.observe(relation([id, v, w], 1, 't_renamed'));
    await schema.settle(1, xid);
    expect(steps).toEqual([
      'renamed t to public.t_renamed',
      'look up 21',
      'before t',
      'alter add',
      'INFO public.t follows its schema change at the destination: column w added',
    ]);
    expect(destination.columns('public.t')).toEqual(['id', 'v', 'w']);
  });

  it('follows it under ignore too (the destination is left as it is), and holds it under hold', async () => {
    const ignored = await evolutionOver({}, { sourceOid: 1, schemaChanges: 'ignore' });
    ignored.schema.observe(relation([id, v], 1, 't_renamed'));
    await ignored.schema.settle(1, xid);
    expect(ignored.steps).toEqual(['renamed t to public.t_renamed']);

    const held = await evolutionOver({}, { sourceOid: 1, schemaChanges: 'hold' });
    held.schema.observe(relation([id, v], 1, 't_renamed'));
    const settled = held.schema.settle(1, xid);
    await expect(settled).rejects.toBeInstanceOf(HeldSchemaChange);
    await expect(settled).rejects.toThrow(
      'schema change of public.t held (schemaChanges: hold): source table public.t was renamed to public.t_renamed',
    );
    expect(held.steps).toEqual(['before t']);
    expect(held.recordedShapes).toEqual([]);
  });

  it('skips, with a word, the changes of another table made under the name of one renamed away', async () => {
    const { schema, steps } = await evolutionOver({}, { sourceOid: 1 });
    schema.observe(relation([id, v], 1, 't_renamed'));
    schema.observe(relation([id, v], 2, 't'));
    expect(schema.needsResolving(2)).toBe(true);
    await schema.resolve([2]);
    expect(schema.relations.tableOf(2)).toBeUndefined();
    expect(schema.needsResolving(2)).toBe(false);
    expect(steps).toEqual([
      'INFO changes of public.t are skipped: it is another table than the one the mirror follows as public.t (renamed or dropped since, and a table made under its name)',
    ]);
  });

  it('is the table by name when its identity is not known (a shape recorded before identities were)', async () => {
    const { schema } = await evolutionOver();
    schema.observe(relation([id, v], 9, 't'));
    expect(schema.needsSettling(9)).toBe(false);
    expect(schema.relations.tableOf(9)?.table.destination.table).toBe('t');
    schema.observe(relation([id, v], 10, 't_renamed'));
    expect(schema.relations.tableOf(10)).toBeUndefined();
  });
});

describe('SchemaEvolution of a primary key changed at the source', () => {
  it('holds the table under every policy: its rows are keyed by the old key', async () => {
    for (const schemaChanges of ['apply', 'ignore', 'hold'] as const) {
      const { schema, destination, recordedShapes } = await evolutionOver({}, { schemaChanges });
      schema.observe(relation([id, { ...v, isKey: true }]));
      expect(schema.needsSettling(1)).toBe(true);
      await expect(schema.settle(1, 0)).rejects.toThrow(
        new HeldSchemaChange(
          'public.t',
          "the primary key of public.t changed at the source from (id) to (id, v), and the destination's rows are keyed by the old one: drop the destination table public.t so that the mirror creates it with the new key, then resync the table",
        ),
      );
      expect(destination.columns('public.t')).toEqual(['id', 'v']);
      expect(recordedShapes).toEqual([]);
    }
  });

  it('follows a key column renamed, and a table under REPLICA IDENTITY FULL (every column flagged)', async () => {
    const renamed = await evolutionOver(
      {},
      {
        live: [
          { attnum: 1, name: 'key' },
          { attnum: 2, name: 'v' },
        ],
      },
    );
    renamed.schema.observe(relation([{ ...id, name: 'key' }, v]));
    await renamed.schema.settle(1, 0);
    expect(renamed.schema.relations.tableOf(1)?.table.keyColumns).toEqual(['key']);

    const full = await evolutionOver();
    full.schema.observe({ ...relation([id, { ...v, isKey: true }]), replicaIdentity: 'full' });
    expect(full.schema.needsSettling(1)).toBe(false);
  });
});

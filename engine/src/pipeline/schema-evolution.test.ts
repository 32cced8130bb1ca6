import { describe, expect, it } from 'vitest';
import { idTextTable } from '../../../test/support/id-text-table.ts';
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
  options: { schemaChanges?: SchemaChangePolicy; live?: { attnum: number; name: string }[] } = {},
) {
  const destination = new MemoryDestination();
  const attnumbered = {
    ...table,
    columns: table.columns.map((column, index) => ({ ...column, attnum: index + 1 })),
  };
  await destination.setupTables([attnumbered]);
  const steps: string[] = [];
  const recorded: string[][] = [];
  const schema = new SchemaEvolution({
    destination: {
      refuseAlteration: async ({ changes }) =>
        changes.some((change) => change.kind === 'drop' && change.name === 'id') ? 'no' : undefined,
      alterColumns: async (alteration) => {
        steps.push(`alter ${alteration.changes.map((change) => change.kind).join(', ')}`);
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
    liveColumns: async () =>
      options.live ?? [
        { attnum: 1, name: 'id' },
        { attnum: 2, name: 'v' },
      ],
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
    },
  });
  return { schema, steps, destination, recorded };
}

const w = { name: 'w', typeOid: 21, typeModifier: -1, isKey: false };

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
    const { schema, steps, destination, recorded } = await evolutionOver(
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
    await schema.settle(1);
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
    expect(recorded).toEqual([['id', 'v', 'w']]);
    expect(schema.needsSettling(1)).toBe(false);
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
    await renamed.schema.settle(1);
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
    await dropped.schema.settle(1);
    expect(dropped.steps).toContain(
      'INFO public.t follows its schema change at the destination: column v dropped, column x added',
    );
  });

  it('widens a type, and holds the table on a narrowing with nothing made', async () => {
    const widened = await evolutionOver();
    widened.schema.observe(relation([id, { ...v, typeOid: 20 }]));
    await expect(widened.schema.settle(1)).rejects.toBeInstanceOf(HeldSchemaChange);
    expect(widened.steps.filter((step) => step.startsWith('alter'))).toEqual([]);

    const { schema, destination } = await evolutionOver();
    schema.observe(relation([{ ...id, typeOid: 21 }, v]));
    const held = await schema.settle(1).catch((error: unknown) => error);
    expect(held).toBeInstanceOf(HeldSchemaChange);
    expect(String(held)).toMatch(/id changed from bigint to smallint, which does not widen it/);
    expect(destination.columns('public.t')).toEqual(['id', 'v']);
  });

  it('holds a table the destination refuses to alter, and every change under hold', async () => {
    const refused = await evolutionOver({}, { live: [{ attnum: 2, name: 'v' }] });
    refused.schema.observe(relation([v]));
    await expect(refused.schema.settle(1)).rejects.toThrow(/held: no \(column id dropped\)/);

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
    await expect(holding.schema.settle(1)).rejects.toThrow(
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
    await schema.settle(1);
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

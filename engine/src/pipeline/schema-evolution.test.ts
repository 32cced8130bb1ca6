import { describe, expect, it } from 'vitest';
import { idTextTable } from '../../../test/support/id-text-table.ts';
import type { RelationMessage } from '../connectors/changes.ts';
import { MemoryDestination } from '../connectors/memory/destination.ts';
import type { TableName } from '../resources/mirror.ts';
import { SchemaEvolution } from './schema-evolution.ts';

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

async function evolutionOver(partitionAncestors: Record<number, readonly TableName[]> = {}) {
  const destination = new MemoryDestination();
  await destination.setupTables([table]);
  const steps: string[] = [];
  const schema = new SchemaEvolution({
    destination: {
      addColumns: async (changed, columns) => {
        steps.push(`add ${columns.map((column) => `${column.name} ${column.typeName}`).join(', ')}`);
        await destination.addColumns(changed, columns);
      },
    },
    tableMappings: [{ source: table.source, destination: table.destination, exclude: [], columns: [] }],
    tables: [table],
    typeNames: async (columns) => {
      steps.push(`look up ${columns.map((column) => column.typeOid).join(', ')}`);
      return columns.map(() => 'bigint');
    },
    partitionAncestors: async (relationId) => partitionAncestors[relationId] ?? [],
    publication: { name: 'pub', createdByMirror: true },
    log: async (level, message) => {
      steps.push(`${level} ${message}`);
    },
    beforeChange: async (changed, addsColumns) => {
      steps.push(`before ${changed.source.table}${addsColumns ? ', idle' : ''}`);
    },
  });
  return { schema, steps, destination };
}

describe('SchemaEvolution', () => {
  it('tracks a mapped relation without waiting when its shape is the table’s', async () => {
    const { schema, steps } = await evolutionOver();
    expect(schema.observe(relation([id, v]))).toBeUndefined();
    expect(schema.relations.tableOf(1)?.keepsTupleOrder).toBe(true);
    expect(schema.needsResolving(1)).toBe(false);
    expect(steps).toEqual([]);
  });

  it('adds a column after the old shape is written, with its looked-up type, and says so', async () => {
    const { schema, steps, destination } = await evolutionOver();
    schema.observe(relation([id, v]));
    await schema.observe(relation([id, v, { name: 'w', typeOid: 21, typeModifier: -1, isKey: false }]));
    expect(steps).toEqual([
      'before t, idle',
      'look up 21',
      'add w bigint',
      'INFO added column(s) w to public.t',
    ]);
    expect(destination.columns('public.t')).toEqual(['id', 'v', 'w']);
    expect(schema.relations.tableOf(1)?.table.columns.map((column) => column.name)).toEqual(['id', 'v', 'w']);
  });

  it('keeps dropped and retyped columns at the destination, and says so', async () => {
    const { schema, steps, destination } = await evolutionOver();
    await schema.observe(relation([{ ...id, typeOid: 23 }]));
    expect(steps).toEqual([
      'before t',
      'WARN column(s) v of public.t were dropped at the source; the destination keeps them and new rows get null',
      'WARN column(s) id of public.t changed type at the source; the destination column type is unchanged',
    ]);
    expect(destination.columns('public.t')).toEqual(['id', 'v']);
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

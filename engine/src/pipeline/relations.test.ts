import { describe, expect, it } from 'vitest';
import { textTable } from '../../../test/support/text-table.ts';
import type { RelationMessage } from '../connectors/changes.ts';
import { project, RelationTracker } from './relations.ts';

const table = textTable(['id', 'a', 'b']);

const relation = (names: readonly string[]): RelationMessage => ({
  tag: 'relation',
  relationId: 7,
  schema: 'public',
  name: 't',
  replicaIdentity: 'default',
  columns: names.map((name) => ({ name, typeOid: 25, typeModifier: -1, isKey: name === 'id' })),
});

function tracked(names: readonly string[]) {
  const tracker = new RelationTracker([table]);
  tracker.observe(relation(names));
  const relationOf = tracker.tableOf(7);
  if (!relationOf) throw new Error('relation not tracked');
  return relationOf;
}

describe('project', () => {
  it('hands a tuple on as it is when the columns line up', () => {
    const tuple = ['1', 'x', 'y'];
    expect(project(tuple, tracked(['id', 'a', 'b']))).toBe(tuple);
  });

  it('reorders, and fills columns the source no longer has with null', () => {
    expect(project(['y', '1', 'x'], tracked(['b', 'id', 'a']))).toEqual(['1', 'x', 'y']);
    expect(project(['1', 'y'], tracked(['id', 'b']))).toEqual(['1', null, 'y']);
  });

  it('copies a tuple longer than the projection (a column the destination does not have yet)', () => {
    const relationOf = tracked(['id', 'a', 'b']);
    expect(project(['1', 'x', 'y', 'extra'], relationOf)).toEqual(['1', 'x', 'y']);
  });
});

describe('RelationTracker', () => {
  it('settles a relation at once when it lists the followed columns, in any order', () => {
    const tracker = new RelationTracker([table]);
    tracker.observe(relation(['b', 'id', 'a']));
    expect(tracker.unsettled(7)).toBeUndefined();
    tracker.observe(relation(['id', 'a', 'c']));
    expect(tracker.unsettled(7)?.columns.map((column) => column.name)).toEqual(['id', 'a', 'c']);
    // Tracked meanwhile, against the table as it is.
    expect(tracker.tableOf(7)?.projection).toEqual([0, 1, -1]);
  });

  it('follows a new shape given for an unsettled relation', () => {
    const tracker = new RelationTracker([table]);
    const renamed = relation(['id', 'a', 'c']);
    tracker.observe(renamed);
    const source = renamed.columns.map(({ name, typeOid, typeModifier }, index) => ({
      name,
      typeOid,
      typeModifier,
      attnum: index + 1,
    }));
    const columns = table.columns.map((column) => (column.name === 'b' ? { ...column, name: 'c' } : column));
    tracker.follow(renamed, { source, table: { ...table, columns } });
    expect(tracker.unsettled(7)).toBeUndefined();
    expect(tracker.tableOf(7)?.keepsTupleOrder).toBe(true);
    expect(tracker.followedSource(table).map((column) => column.name)).toEqual(['id', 'a', 'c']);
  });
});

describe('RelationTracker by identity', () => {
  const a = { ...textTable(['id', 'v']), source: { schema: 'public', table: 'a' } };
  const b = { ...textTable(['id', 'v']), source: { schema: 'public', table: 'b' } };
  const named = (relationId: number, name: string): RelationMessage => ({
    ...relation(['id', 'v']),
    relationId,
    name,
  });

  it('keeps two tables apart when they swap names', () => {
    const tracker = new RelationTracker(
      [a, b],
      new Map(),
      new Map([
        ['public.a', { oid: 1 }],
        ['public.b', { oid: 2 }],
      ]),
    );
    tracker.observe(named(1, 'b'));
    tracker.observe(named(2, 'a'));
    expect(tracker.tableOf(1)?.table).toBe(a);
    expect(tracker.tableOf(2)?.table).toBe(b);
    expect(tracker.renameOf(named(1, 'b'))).toBe('public.b');
    expect(tracker.identityOf(a)).toEqual({ oid: 1, name: 'public.a' });
    expect(tracker.namesakeOf(named(3, 'a'))).toEqual({ table: a, oid: 1 });
    expect(tracker.namesakeOf(named(1, 'a'))).toBeUndefined();
  });
});

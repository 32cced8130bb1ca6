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
  const tracker = new RelationTracker(
    [{ source: table.source, destination: table.destination, exclude: [], columns: [] }],
    [table],
  );
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

import { describe, expect, it } from 'vitest';
import { alignRelation, diffShapes, type ShapeColumn } from './schema-diff.ts';

const int = 23;
const text = 25;
const column = (name: string, attnum: number | undefined, typeOid = int): ShapeColumn => ({
  name,
  attnum,
  typeOid,
  typeModifier: -1,
});
const before = [column('id', 1), column('a', 2), column('b', 3, text)];

/** The catalog's columns now, as (attnum, name) pairs. */
const live = (...columns: [number, string][]) => columns.map(([attnum, name]) => ({ attnum, name }));

describe('alignRelation', () => {
  it('tells the rename of a column followed without an attnum (added, then renamed before the catalog was read)', () => {
    // e was added by a message the catalog had already renamed e to e2 for: it has no attnum.
    const followed = [column('id', 1), column('v', 2, text), column('e', undefined, text)];
    const aligned = alignRelation(
      followed,
      ['id', 'v', 'e2', 'f'],
      live([1, 'id'], [2, 'v'], [3, 'e2'], [4, 'f']),
    );
    expect(aligned).toEqual({ attnums: [1, 2, 3, 4], exact: true, learnt: new Map([[2, 3]]) });
    const learnt = followed.map((c, index) => ({ ...c, attnum: aligned.learnt.get(index) ?? c.attnum }));
    const after = [column('id', 1), column('v', 2, text), column('e2', 3, text), column('f', 4)];
    expect(diffShapes(learnt, after).map((change) => change.kind)).toEqual(['rename', 'add']);
    // A shape with no attnums at all (recorded before they were) is matched by name:
    // a dropped column is not taken for the rename of another.
    const unnumbered = [column('id', undefined), column('a', undefined), column('b', undefined, text)];
    expect(alignRelation(unnumbered, ['id', 'b'], live([1, 'id'], [3, 'b']))).toEqual({
      attnums: [undefined, undefined],
      exact: true,
      learnt: new Map(),
    });
    // The same column under its own name still pairs by name, and an add beside it takes its attnum.
    expect(
      alignRelation(followed, ['id', 'v', 'e', 'g'], live([1, 'id'], [2, 'v'], [3, 'e'], [4, 'g'])),
    ).toEqual({ attnums: [1, 2, 3, 4], exact: true, learnt: new Map([[2, 3]]) });
  });

  it('keeps the attnums of columns that kept their names', () => {
    expect(alignRelation(before, ['id', 'a', 'b'], live([1, 'id'], [2, 'a'], [3, 'b']))).toEqual({
      attnums: [1, 2, 3],
      exact: true,
      learnt: new Map(),
    });
  });

  it('tells a rename from a drop and an add by the attnum still alive', () => {
    expect(alignRelation(before, ['id', 'x', 'b'], live([1, 'id'], [2, 'x'], [3, 'b'])).attnums).toEqual([
      1, 2, 3,
    ]);
    // The last column renamed: the same message as a drop of b and an add of x.
    expect(alignRelation(before, ['id', 'a', 'x'], live([1, 'id'], [2, 'a'], [3, 'x'])).attnums).toEqual([
      1, 2, 3,
    ]);
    expect(alignRelation(before, ['id', 'a', 'x'], live([1, 'id'], [2, 'a'], [4, 'x'])).attnums).toEqual([
      1, 2, 4,
    ]);
  });

  it('pairs a dropped column with nothing, and an added one with its new attnum', () => {
    expect(alignRelation(before, ['id', 'b', 'c'], live([1, 'id'], [3, 'b'], [4, 'c'])).attnums).toEqual([
      1, 3, 4,
    ]);
  });

  it('takes a column dropped and added again under its name for a new column', () => {
    expect(alignRelation(before, ['id', 'b', 'a'], live([1, 'id'], [3, 'b'], [4, 'a'])).attnums).toEqual([
      1, 3, 4,
    ]);
  });

  it('keeps a column the catalog dropped after the message', () => {
    // The message still has a (and an added c); the catalog no longer has a.
    expect(alignRelation(before, ['id', 'a', 'b', 'c'], live([1, 'id'], [3, 'b'], [4, 'c']))).toEqual({
      attnums: [1, 2, 3, 4],
      exact: true,
      learnt: new Map(),
    });
    // a renamed to x, then dropped after the message: a rename, not a drop and an add.
    expect(alignRelation(before, ['id', 'x', 'b'], live([1, 'id'], [3, 'b'])).attnums).toEqual([1, 2, 3]);
  });

  it('pairs two columns that swapped names by position', () => {
    const swapped = alignRelation(before, ['id', 'b', 'a'], live([1, 'id'], [2, 'b'], [3, 'a']));
    expect(swapped.attnums).toEqual([1, 2, 3]);
    const renamed = [column('id', 1), column('b', 2), column('a', 3, text)];
    expect(diffShapes(before, renamed).filter((change) => change.kind === 'rename')).toEqual([
      { kind: 'rename', from: 'a', to: 'a_tributary_renaming' },
      { kind: 'rename', from: 'b', to: 'a' },
      { kind: 'rename', from: 'a_tributary_renaming', to: 'b' },
    ]);
  });

  it('matches by name when the message cannot hold every column alive now', () => {
    expect(alignRelation(before, ['id', 'a'], live([1, 'id'], [2, 'a'], [3, 'b']))).toEqual({
      attnums: [1, 2],
      exact: false,
      learnt: new Map(),
    });
  });
});

describe('diffShapes', () => {
  it('finds nothing in the same shape', () => {
    expect(diffShapes(before, before)).toEqual([]);
  });

  it('orders drops, renames, type changes and adds', () => {
    const after = [column('id', 1), column('b', 2), column('c', 3), column('d', undefined)];
    expect(diffShapes(before, after).map((change) => change.kind)).toEqual([
      'rename',
      'rename',
      'retype',
      'add',
    ]);
    // b→c must run before a→b takes the name b.
    expect(diffShapes(before, after).filter((change) => change.kind === 'rename')).toEqual([
      { kind: 'rename', from: 'b', to: 'c' },
      { kind: 'rename', from: 'a', to: 'b' },
    ]);
  });

  it('drops a column the new shape does not have', () => {
    expect(diffShapes(before, [column('id', 1), column('b', 3, text)])).toEqual([
      { kind: 'drop', name: 'a' },
    ]);
  });

  it('adds a column of a new attnum even under an old name', () => {
    const after = [column('id', 1), column('b', 3, text), column('a', 4)];
    expect(diffShapes(before, after)).toEqual([
      { kind: 'drop', name: 'a' },
      { kind: 'add', column: column('a', 4) },
    ]);
  });
});

import { describe, expect, it } from 'vitest';
import { coalesceChanges, finalStates, rowKey } from './coalesce.ts';
import { type RowChange, unchangedToast } from './records.ts';
import { rowOfCells } from './rows.ts';

const transaction = { xid: 1, commitLsn: 100n, commitTimeMicros: 0n };

const key = [0];

function finals(changes: RowChange[]) {
  return [...finalStates(changes, key).finals.values()];
}

describe('coalesceChanges', () => {
  it('keeps the last image of each key', () => {
    const changes: RowChange[] = [
      { transaction, kind: 'insert', newRow: rowOfCells(['1', 'a']) },
      { transaction, kind: 'update', oldKey: null, newRow: rowOfCells(['1', 'b']) },
      { transaction, kind: 'insert', newRow: rowOfCells(['2', 'x']) },
    ];
    expect(coalesceChanges(changes, key)).toEqual({
      truncated: false,
      upserts: [
        ['1', 'b'],
        ['2', 'x'],
      ],
      deletes: [],
    });
  });

  it('turns insert then delete into a delete, and delete then insert into an upsert', () => {
    const changes: RowChange[] = [
      { transaction, kind: 'insert', newRow: rowOfCells(['1', 'a']) },
      { transaction, kind: 'delete', oldKey: rowOfCells(['1', null]) },
      { transaction, kind: 'delete', oldKey: rowOfCells(['2', null]) },
      { transaction, kind: 'insert', newRow: rowOfCells(['2', 'again']) },
    ];
    expect(coalesceChanges(changes, key)).toEqual({
      truncated: false,
      upserts: [['2', 'again']],
      deletes: [['1', null]],
    });
  });

  it('deletes the old key when an update changes the key', () => {
    const changes: RowChange[] = [
      { transaction, kind: 'update', oldKey: rowOfCells(['1', null]), newRow: rowOfCells(['5', 'moved']) },
    ];
    expect(coalesceChanges(changes, key)).toEqual({
      truncated: false,
      upserts: [['5', 'moved']],
      deletes: [['1', null]],
    });
  });

  it('fills unchanged TOAST cells from an earlier image in the batch', () => {
    const changes: RowChange[] = [
      { transaction, kind: 'insert', newRow: rowOfCells(['1', 'big value', 'a']) },
      { transaction, kind: 'update', oldKey: null, newRow: rowOfCells(['1', unchangedToast, 'b']) },
    ];
    expect(coalesceChanges(changes, key).upserts).toEqual([['1', 'big value', 'b']]);
  });

  it('keeps the unchanged marker when the batch has no earlier image', () => {
    const changes: RowChange[] = [
      { transaction, kind: 'update', oldKey: null, newRow: rowOfCells(['1', unchangedToast, 'b']) },
    ];
    expect(coalesceChanges(changes, key).upserts).toEqual([['1', unchangedToast, 'b']]);
  });

  it('drops changes before a truncate and reports it', () => {
    const changes: RowChange[] = [
      { transaction, kind: 'insert', newRow: rowOfCells(['1', 'gone']) },
      { transaction, kind: 'truncate' },
      { transaction, kind: 'insert', newRow: rowOfCells(['2', 'kept']) },
    ];
    expect(coalesceChanges(changes, key)).toEqual({ truncated: true, upserts: [['2', 'kept']], deletes: [] });
  });

  it("fills the new row of a key change from the old key's earlier image", () => {
    const changes: RowChange[] = [
      { transaction, kind: 'insert', newRow: rowOfCells(['1', 'big value', 'a']) },
      {
        transaction,
        kind: 'update',
        oldKey: rowOfCells(['1', null, null]),
        newRow: rowOfCells(['2', unchangedToast, 'b']),
      },
    ];
    expect(coalesceChanges(changes, key)).toEqual({
      truncated: false,
      upserts: [['2', 'big value', 'b']],
      deletes: [['1', null, null]],
    });
  });

  it('tells a null key cell from an empty string', () => {
    const changes: RowChange[] = [
      { transaction, kind: 'insert', newRow: rowOfCells(['', 'empty']) },
      { transaction, kind: 'insert', newRow: rowOfCells([null, 'null']) },
    ];
    expect(coalesceChanges(changes, key).upserts).toHaveLength(2);
  });

  it('orders composite keys by every key column', () => {
    const changes: RowChange[] = [
      { transaction, kind: 'insert', newRow: rowOfCells(['1', '1', 'a']) },
      { transaction, kind: 'insert', newRow: rowOfCells(['1', '2', 'b']) },
      { transaction, kind: 'update', oldKey: null, newRow: rowOfCells(['1', '1', 'c']) },
    ];
    expect(coalesceChanges(changes, [0, 1]).upserts).toEqual([
      ['1', '2', 'b'],
      ['1', '1', 'c'],
    ]);
  });
});

describe('finalStates', () => {
  it('keeps the last change per key with its index', () => {
    expect(
      finals([
        { transaction, kind: 'insert', newRow: rowOfCells(['1', 'a']) },
        { transaction, kind: 'insert', newRow: rowOfCells(['2', 'x']) },
        { transaction, kind: 'update', oldKey: null, newRow: rowOfCells(['1', 'b']) },
      ]),
    ).toEqual([
      { op: 'upsert', row: ['1', 'b'], fillKey: ['1', 'a'], index: 2 },
      { op: 'upsert', row: ['2', 'x'], fillKey: ['2', 'x'], index: 1 },
    ]);
  });

  it('fills unchanged TOAST cells from an earlier image, else leaves them for the destination', () => {
    const [first, second] = finals([
      { transaction, kind: 'insert', newRow: rowOfCells(['1', 'body', 't']) },
      { transaction, kind: 'update', oldKey: null, newRow: rowOfCells(['1', unchangedToast, 'u']) },
      { transaction, kind: 'update', oldKey: null, newRow: rowOfCells(['2', unchangedToast, 'v']) },
    ]);
    expect(first).toMatchObject({ op: 'upsert', row: ['1', 'body', 'u'], index: 1 });
    expect(second).toMatchObject({
      op: 'upsert',
      row: ['2', unchangedToast, 'v'],
      fillKey: ['2', unchangedToast, 'v'],
    });
  });

  it('turns a key change into a delete of the old key, the new row filled from the old one', () => {
    expect(
      finals([
        {
          transaction,
          kind: 'update',
          oldKey: rowOfCells(['1', null]),
          newRow: rowOfCells(['9', unchangedToast]),
        },
      ]),
    ).toEqual([
      { op: 'upsert', row: ['9', unchangedToast], fillKey: ['1', null], index: 0 },
      { op: 'delete', key: ['1', null], last: undefined, index: 0 },
    ]);
  });

  it('remembers the image a delete removed, for soft delete', () => {
    expect(
      finals([
        { transaction, kind: 'insert', newRow: rowOfCells(['1', 'a']) },
        { transaction, kind: 'delete', oldKey: rowOfCells(['1', null]) },
      ]),
    ).toEqual([
      {
        op: 'delete',
        key: ['1', null],
        last: { op: 'upsert', row: ['1', 'a'], fillKey: ['1', 'a'], index: 0 },
        index: 1,
      },
    ]);
  });

  it('drops what came before the last truncate and reports its index', () => {
    const plan = finalStates(
      [
        { kind: 'insert', newRow: rowOfCells(['1', 'a']) },
        { kind: 'truncate' },
        { kind: 'insert', newRow: rowOfCells(['2', 'b']) },
      ],
      key,
    );
    expect(plan.truncateIndex).toBe(1);
    expect([...plan.finals.values()]).toEqual([
      { op: 'upsert', row: ['2', 'b'], fillKey: ['2', 'b'], index: 2 },
    ]);
  });
});

describe('rowKey', () => {
  it('tells keys apart exactly when their cells differ, for one and for several key columns', () => {
    const rows = [
      ['a', 'b'],
      ['a', ''],
      ['a', null],
      ['', null],
      [null, null],
      ['a\u0000', 'b'],
      ['ab', ''],
    ];
    for (const keys of [[0], [1], [0, 1]]) {
      for (const left of rows) {
        for (const right of rows) {
          const same = keys.every((index) => left[index] === right[index]);
          expect(
            rowKey(rowOfCells(left), keys) === rowKey(rowOfCells(right), keys),
            `${keys}: ${left} / ${right}`,
          ).toBe(same);
        }
      }
    }
  });
});

import { describe, expect, it } from 'vitest';
import { type RowChange, unchangedToast } from '../records.ts';
import { planTableChanges, rowVersion } from './batch-plan.ts';

const transaction = { xid: 1, commitLsn: 100n, commitTimeMicros: 0n };
const key = [0];

function finals(changes: RowChange[]) {
  return [...planTableChanges(changes, key).finals.values()];
}

describe('row versions', () => {
  it('put the batch id above 27 bits of change index', () => {
    expect(rowVersion(1n, 0)).toBe(134_217_728n);
    expect(rowVersion(2n, 5)).toBe(2n * 134_217_728n + 5n);
    // Any change of a later batch wins over every change of an earlier one.
    expect(rowVersion(3n, 0)).toBeGreaterThan(rowVersion(2n, 99_999_999));
    expect(() => rowVersion(1n, 2 ** 27)).toThrow(/2\^27/);
  });
});

describe('planTableChanges', () => {
  it('keeps the last change per key with its index', () => {
    expect(
      finals([
        { transaction, kind: 'insert', newRow: ['1', 'a'] },
        { transaction, kind: 'insert', newRow: ['2', 'x'] },
        { transaction, kind: 'update', oldKey: null, newRow: ['1', 'b'] },
      ]),
    ).toEqual([
      { op: 'upsert', row: ['1', 'b'], fillKey: ['1', 'a'], index: 2 },
      { op: 'upsert', row: ['2', 'x'], fillKey: ['2', 'x'], index: 1 },
    ]);
  });

  it('fills unchanged TOAST cells from an earlier image, else leaves them for the destination', () => {
    const [first, second] = finals([
      { transaction, kind: 'insert', newRow: ['1', 'body', 't'] },
      { transaction, kind: 'update', oldKey: null, newRow: ['1', unchangedToast, 'u'] },
      { transaction, kind: 'update', oldKey: null, newRow: ['2', unchangedToast, 'v'] },
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
      finals([{ transaction, kind: 'update', oldKey: ['1', null], newRow: ['9', unchangedToast] }]),
    ).toEqual([
      { op: 'upsert', row: ['9', unchangedToast], fillKey: ['1', null], index: 0 },
      { op: 'delete', key: ['1', null], last: undefined, index: 0 },
    ]);
  });

  it('remembers the image a delete removed, for soft delete', () => {
    expect(
      finals([
        { transaction, kind: 'insert', newRow: ['1', 'a'] },
        { transaction, kind: 'delete', oldKey: ['1', null] },
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
    const plan = planTableChanges(
      [
        { transaction, kind: 'insert', newRow: ['1', 'a'] },
        { transaction, kind: 'truncate' },
        { transaction, kind: 'insert', newRow: ['2', 'b'] },
      ],
      key,
    );
    expect(plan.truncateIndex).toBe(1);
    expect([...plan.finals.values()]).toEqual([
      { op: 'upsert', row: ['2', 'b'], fillKey: ['2', 'b'], index: 2 },
    ]);
  });
});

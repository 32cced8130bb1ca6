import { describe, expect, it } from 'vitest';
import { coalesceChanges } from './coalesce.ts';
import { type RowChange, unchangedToast } from './records.ts';

const transaction = { xid: 1, commitLsn: 100n, commitTimeMicros: 0n };

const key = [0];

describe('coalesceChanges', () => {
  it('keeps the last image of each key', () => {
    const changes: RowChange[] = [
      { transaction, kind: 'insert', newRow: ['1', 'a'] },
      { transaction, kind: 'update', oldKey: null, newRow: ['1', 'b'] },
      { transaction, kind: 'insert', newRow: ['2', 'x'] },
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
      { transaction, kind: 'insert', newRow: ['1', 'a'] },
      { transaction, kind: 'delete', oldKey: ['1', null] },
      { transaction, kind: 'delete', oldKey: ['2', null] },
      { transaction, kind: 'insert', newRow: ['2', 'again'] },
    ];
    expect(coalesceChanges(changes, key)).toEqual({
      truncated: false,
      upserts: [['2', 'again']],
      deletes: [['1', null]],
    });
  });

  it('deletes the old key when an update changes the key', () => {
    const changes: RowChange[] = [
      { transaction, kind: 'update', oldKey: ['1', null], newRow: ['5', 'moved'] },
    ];
    expect(coalesceChanges(changes, key)).toEqual({
      truncated: false,
      upserts: [['5', 'moved']],
      deletes: [['1', null]],
    });
  });

  it('fills unchanged TOAST cells from an earlier image in the batch', () => {
    const changes: RowChange[] = [
      { transaction, kind: 'insert', newRow: ['1', 'big value', 'a'] },
      { transaction, kind: 'update', oldKey: null, newRow: ['1', unchangedToast, 'b'] },
    ];
    expect(coalesceChanges(changes, key).upserts).toEqual([['1', 'big value', 'b']]);
  });

  it('keeps the unchanged marker when the batch has no earlier image', () => {
    const changes: RowChange[] = [
      { transaction, kind: 'update', oldKey: null, newRow: ['1', unchangedToast, 'b'] },
    ];
    expect(coalesceChanges(changes, key).upserts).toEqual([['1', unchangedToast, 'b']]);
  });

  it('drops changes before a truncate and reports it', () => {
    const changes: RowChange[] = [
      { transaction, kind: 'insert', newRow: ['1', 'gone'] },
      { transaction, kind: 'truncate' },
      { transaction, kind: 'insert', newRow: ['2', 'kept'] },
    ];
    expect(coalesceChanges(changes, key)).toEqual({ truncated: true, upserts: [['2', 'kept']], deletes: [] });
  });

  it('tells a null key cell from an empty string', () => {
    const changes: RowChange[] = [
      { transaction, kind: 'insert', newRow: ['', 'empty'] },
      { transaction, kind: 'insert', newRow: [null, 'null'] },
    ];
    expect(coalesceChanges(changes, key).upserts).toHaveLength(2);
  });

  it('orders composite keys by every key column', () => {
    const changes: RowChange[] = [
      { transaction, kind: 'insert', newRow: ['1', '1', 'a'] },
      { transaction, kind: 'insert', newRow: ['1', '2', 'b'] },
      { transaction, kind: 'update', oldKey: null, newRow: ['1', '1', 'c'] },
    ];
    expect(coalesceChanges(changes, [0, 1]).upserts).toEqual([
      ['1', '2', 'b'],
      ['1', '1', 'c'],
    ]);
  });
});

import { describe, expect, it } from 'vitest';
import { coalesceChanges } from './coalesce.ts';
import { unchangedToast } from './postgres/pgoutput.ts';
import type { RowChange } from './records.ts';

const key = [0];

describe('coalesceChanges', () => {
  it('keeps the last image of each key', () => {
    const changes: RowChange[] = [
      { kind: 'insert', newRow: ['1', 'a'] },
      { kind: 'update', oldKey: null, newRow: ['1', 'b'] },
      { kind: 'insert', newRow: ['2', 'x'] },
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
      { kind: 'insert', newRow: ['1', 'a'] },
      { kind: 'delete', oldKey: ['1', null] },
      { kind: 'delete', oldKey: ['2', null] },
      { kind: 'insert', newRow: ['2', 'again'] },
    ];
    expect(coalesceChanges(changes, key)).toEqual({
      truncated: false,
      upserts: [['2', 'again']],
      deletes: [['1', null]],
    });
  });

  it('deletes the old key when an update changes the key', () => {
    const changes: RowChange[] = [{ kind: 'update', oldKey: ['1', null], newRow: ['5', 'moved'] }];
    expect(coalesceChanges(changes, key)).toEqual({
      truncated: false,
      upserts: [['5', 'moved']],
      deletes: [['1', null]],
    });
  });

  it('fills unchanged TOAST cells from an earlier image in the batch', () => {
    const changes: RowChange[] = [
      { kind: 'insert', newRow: ['1', 'big value', 'a'] },
      { kind: 'update', oldKey: null, newRow: ['1', unchangedToast, 'b'] },
    ];
    expect(coalesceChanges(changes, key).upserts).toEqual([['1', 'big value', 'b']]);
  });

  it('keeps the unchanged marker when the batch has no earlier image', () => {
    const changes: RowChange[] = [{ kind: 'update', oldKey: null, newRow: ['1', unchangedToast, 'b'] }];
    expect(coalesceChanges(changes, key).upserts).toEqual([['1', unchangedToast, 'b']]);
  });

  it('drops changes before a truncate and reports it', () => {
    const changes: RowChange[] = [
      { kind: 'insert', newRow: ['1', 'gone'] },
      { kind: 'truncate' },
      { kind: 'insert', newRow: ['2', 'kept'] },
    ];
    expect(coalesceChanges(changes, key)).toEqual({ truncated: true, upserts: [['2', 'kept']], deletes: [] });
  });

  it('tells a null key cell from an empty string', () => {
    const changes: RowChange[] = [
      { kind: 'insert', newRow: ['', 'empty'] },
      { kind: 'insert', newRow: [null, 'null'] },
    ];
    expect(coalesceChanges(changes, key).upserts).toHaveLength(2);
  });

  it('orders composite keys by every key column', () => {
    const changes: RowChange[] = [
      { kind: 'insert', newRow: ['1', '1', 'a'] },
      { kind: 'insert', newRow: ['1', '2', 'b'] },
      { kind: 'update', oldKey: null, newRow: ['1', '1', 'c'] },
    ];
    expect(coalesceChanges(changes, [0, 1]).upserts).toEqual([
      ['1', '2', 'b'],
      ['1', '1', 'c'],
    ]);
  });
});

import { describe, expect, it } from 'vitest';
import { textTable } from '../../../../../test/support/text-table.ts';
import { wireTuple } from '../../../../../test/support/wire-tuple.ts';
import type { RowChange } from '../../records.ts';
import { rowOfCells } from '../../rows.ts';
import { PostgresTableChanges } from './table-changes.ts';

const transaction = { xid: 1, commitLsn: 100n, commitTimeMicros: 0n };
const table = textTable(['id', 'v']);
const insert = (id: string): RowChange => ({ transaction, kind: 'insert', newRow: rowOfCells([id, 'v']) });

/** The rows held as new rows, by key. */
const newKeys = (held: PostgresTableChanges) =>
  Buffer.concat(held.newRows?.chunks() ?? [])
    .toString('utf8')
    .split('\n')
    .slice(0, -1)
    .map((line) => line.split('\t')[0]);

describe('PostgresTableChanges', () => {
  it('holds the inserts before any other change as new rows, and stages everything after', () => {
    const held = new PostgresTableChanges(table, true);
    for (const change of [insert('1'), insert('2')]) held.add(change);
    expect(held.staged).toBeUndefined();
    held.add({ transaction, kind: 'delete', oldKey: rowOfCells(['1', null]) });
    held.add(insert('3'));
    expect(newKeys(held)).toEqual(['1', '2']);
    const folded = held.staged?.fold();
    expect([folded?.upsertCount, folded?.deleteCount]).toEqual([1, 1]);
    expect(held.truncated).toBe(false);
  });

  it('drops what came before a truncate, and holds new rows again after it', () => {
    const held = new PostgresTableChanges(table, true);
    held.add(insert('1'));
    held.add({ transaction, kind: 'delete', oldKey: rowOfCells(['1', null]) });
    held.add({ transaction, kind: 'truncate' });
    held.add(insert('2'));
    expect(held.truncated).toBe(true);
    expect(newKeys(held)).toEqual(['2']);
    expect(held.staged).toBeUndefined();
  });

  it('stages inserts too when new rows may not be COPYed into the table', () => {
    const held = new PostgresTableChanges(table, false);
    held.add(insert('1'));
    expect(held.newRows).toBeUndefined();
    expect(held.staged?.fold().upsertCount).toBe(1);
  });

  it('holds inserts over the source’s bytes as new rows, written from the bytes, until another change', () => {
    const held = new PostgresTableChanges(table, true);
    expect(held.add({ transaction, kind: 'insert', newRow: wireTuple(['1', 'v']) })).toBe('1\tv\n'.length);
    held.add(insert('2'));
    expect(held.add({ transaction, kind: 'insert', newRow: wireTuple(['3', 'a\tb']) })).toBe(
      '3\ta\\tb\n'.length,
    );
    expect(newKeys(held)).toEqual(['1', '2', '3']);
    held.add({ transaction, kind: 'delete', oldKey: rowOfCells(['1', null]) });
    // Staged from here on.
    held.add({ transaction, kind: 'insert', newRow: wireTuple(['4', 'v']) });
    expect(newKeys(held)).toEqual(['1', '2', '3']);
    expect(held.staged?.fold().upsertCount).toBe(1);
  });
});

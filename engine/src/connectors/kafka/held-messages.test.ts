import { describe, expect, it } from 'vitest';
import { typedColumn } from '../../../../test/support/text-table.ts';
import type { DestinationTable, RowChange, SourceTransaction } from '../records.ts';
import { rowOfCells } from '../rows.ts';
import { type HeldMessage, HeldMessages } from './held-messages.ts';
import { changeRecord, tableFormat } from './message-format.ts';

const table: DestinationTable = {
  source: { schema: 'public', table: 'orders' },
  destination: { schema: 'sales', table: 'orders' },
  columns: [typedColumn('id', 20), typedColumn('note', 25)],
  keyColumns: ['id'],
};
const transaction: SourceTransaction = { xid: 7, commitLsn: 0x10n, commitTimeMicros: 1_700_000_000_000_000n };

/** What the destination sends for a change without holding it: its default message. */
function expected(change: RowChange) {
  const record = changeRecord(tableFormat(table), change);
  return { key: record.key, value: record.json, truncate: change.kind === 'truncate' };
}

/** A held message's bytes as text, compared as strings (a byte-by-byte deep equal of megabytes is slow). */
function asText({ key, value, truncate }: HeldMessage) {
  return { key: key === null ? null : key.toString('utf8'), value: value.toString('utf8'), truncate };
}

describe('HeldMessages', () => {
  it('holds each change as the bytes of its default message, in order', () => {
    const changes: RowChange[] = [
      { transaction, kind: 'insert', newRow: rowOfCells(['1', 'plain']) },
      {
        transaction,
        kind: 'update',
        oldKey: null,
        newRow: rowOfCells(['1', 'é ✓ 𝄞 "quoted" \\ and\nnewline']),
      },
      { transaction, kind: 'delete', oldKey: rowOfCells(['1', null]) },
      { transaction, kind: 'truncate' },
      { transaction, kind: 'insert', newRow: rowOfCells(['2', null]) },
    ];
    const held = new HeldMessages(tableFormat(table));
    for (const change of changes) held.add(change);
    expect(held.messageCount).toBe(5);
    expect([...held.messages()].map(asText)).toEqual(changes.map(expected));
  });

  it('moves on to new chunks, and gives a message larger than a chunk one of its own', () => {
    const held = new HeldMessages(tableFormat(table));
    const changes: RowChange[] = [];
    for (let id = 0; id < 3_000; id++) {
      changes.push({ transaction, kind: 'insert', newRow: rowOfCells([String(id), `ü${'x'.repeat(200)}`]) });
    }
    changes.push({ transaction, kind: 'insert', newRow: rowOfCells(['999999', '✓'.repeat(400_000)]) });
    changes.push({ transaction, kind: 'insert', newRow: rowOfCells(['1000000', 'small']) });
    let bytes = 0;
    for (const change of changes) bytes += held.add(change);
    const messages = [...held.messages()];
    expect(messages.map(asText)).toEqual(changes.map(expected));
    // The budget is told at least the bytes held.
    const heldBytes = messages.reduce((sum, { key, value }) => sum + (key?.length ?? 0) + value.length, 0);
    expect(bytes).toBeGreaterThanOrEqual(heldBytes);
  });
});

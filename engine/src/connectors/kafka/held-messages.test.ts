import { describe, expect, it } from 'vitest';
import { typedColumn } from '../../../../test/support/text-table.ts';
import { wireTuple } from '../../../../test/support/wire-tuple.ts';
import { type DestinationTable, type RowChange, type SourceTransaction, unchangedToast } from '../records.ts';
import { rowOfCells } from '../rows.ts';
import { type HeldMessage, HeldMessages } from './held-messages.ts';
import { tableFormat } from './message-format.ts';
import { changeRecord } from './script-records.ts';

const table: DestinationTable = {
  source: { schema: 'public', table: 'orders' },
  destination: { schema: 'sales', table: 'orders' },
  columns: [typedColumn('id', 20), typedColumn('note', 25)],
  keyColumns: ['id'],
};
const transaction: SourceTransaction = { xid: 7, commitLsn: 0x10n, commitTimeMicros: 1_700_000_000_000_000n };

/** A change's default message as a script's record carries it (the same encoder, as text). */
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

  it('writes each kind of message to the byte: inserts, updates with and without an old key, deletes, truncates, snapshot rows', () => {
    const timed: DestinationTable = { ...table, columns: [...table.columns, typedColumn('at', 1184)] };
    const changes: RowChange[] = [
      { transaction, kind: 'insert', newRow: wireTuple(['1', 'plain', '2026-11-29 10:11:12.5+00']) },
      { transaction, kind: 'update', oldKey: null, newRow: wireTuple(['1', 'é "q"', unchangedToast]) },
      {
        transaction,
        kind: 'update',
        oldKey: rowOfCells(['1', null, null]),
        newRow: wireTuple(['2', 'x', null]),
      },
      { transaction, kind: 'delete', oldKey: rowOfCells(['2', null, null]) },
      { transaction, kind: 'truncate' },
    ];
    const held = new HeldMessages(tableFormat(timed));
    for (const change of changes) held.add(change);
    expect(held.addSnapshotLines(Buffer.from('3\ttab\\there\t2026-11-29 10:11:12+00\n'))).toBe(1);
    // The format of docs/kafka.md, pinned: a change to these bytes is a change of the interface.
    expect([...held.messages()].map(asText)).toEqual([
      {
        key: '{"id":"1"}',
        value:
          '{"kind":"insert","source":{"schema":"public","table":"orders"},"target":"sales.orders","lsn":"0/10","commit_time":"2023-11-14T22:13:20Z","xid":7,"old":null,"new":{"id":"1","note":"plain","at":"2026-11-29T10:11:12.5Z"},"unchanged_columns":[]}',
        truncate: false,
      },
      {
        key: '{"id":"1"}',
        value:
          '{"kind":"update","source":{"schema":"public","table":"orders"},"target":"sales.orders","lsn":"0/10","commit_time":"2023-11-14T22:13:20Z","xid":7,"old":null,"new":{"id":"1","note":"é \\"q\\""},"unchanged_columns":["at"]}',
        truncate: false,
      },
      {
        key: '{"id":"2"}',
        value:
          '{"kind":"update","source":{"schema":"public","table":"orders"},"target":"sales.orders","lsn":"0/10","commit_time":"2023-11-14T22:13:20Z","xid":7,"old":{"id":"1"},"new":{"id":"2","note":"x","at":null},"unchanged_columns":[]}',
        truncate: false,
      },
      {
        key: '{"id":"2"}',
        value:
          '{"kind":"delete","source":{"schema":"public","table":"orders"},"target":"sales.orders","lsn":"0/10","commit_time":"2023-11-14T22:13:20Z","xid":7,"old":{"id":"2"},"new":null,"unchanged_columns":[]}',
        truncate: false,
      },
      {
        key: null,
        value:
          '{"kind":"truncate","source":{"schema":"public","table":"orders"},"target":"sales.orders","lsn":"0/10","commit_time":"2023-11-14T22:13:20Z","xid":7,"old":null,"new":null,"unchanged_columns":[]}',
        truncate: true,
      },
      {
        key: '{"id":"3"}',
        value:
          '{"kind":"snapshot","source":{"schema":"public","table":"orders"},"target":"sales.orders","lsn":null,"commit_time":null,"xid":null,"old":null,"new":{"id":"3","note":"tab\\there","at":"2026-11-29T10:11:12Z"},"unchanged_columns":[]}',
        truncate: false,
      },
    ]);
  });
});

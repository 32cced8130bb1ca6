import { describe, expect, it } from 'vitest';
import type { DestinationTable, NewRowsBuffer, RowImage } from '../connectors/records.ts';
import { BatchBuilder } from './batch-builder.ts';

const transaction = { xid: 1, commitLsn: 100n, commitTimeMicros: 0n };

const table: DestinationTable = {
  source: { schema: 'public', table: 't' },
  destination: { schema: 'public', table: 't' },
  columns: [],
  keyColumns: ['id'],
};

describe('BatchBuilder', () => {
  it('is full at the row limit', () => {
    const builder = new BatchBuilder({ maxRows: 2, maxBytes: 1e9 }, 0n);
    expect(builder.add(table, { transaction, kind: 'insert', newRow: ['1'] }, 10n, 0)).toBe(true);
    expect(builder.isFull).toBe(false);
    expect(builder.add(table, { transaction, kind: 'insert', newRow: ['2'] }, 11n, 0)).toBe(false);
    expect(builder.isFull).toBe(true);
  });

  it('is full at the byte budget before the row limit', () => {
    const builder = new BatchBuilder({ maxRows: 1_000_000, maxBytes: 100 }, 0n);
    builder.add(table, { transaction, kind: 'insert', newRow: ['x'.repeat(200)] }, 10n, 0);
    expect(builder.isFull).toBe(true);
  });

  it('acknowledges only the last complete commit, starting from the durable one', () => {
    const builder = new BatchBuilder({ maxRows: 10, maxBytes: 1e9 }, 100n);
    builder.add(table, { transaction, kind: 'insert', newRow: ['1'] }, 110n, 0);
    builder.commit(120n);
    builder.add(table, { transaction, kind: 'insert', newRow: ['2'] }, 130n, 0);
    const batch = builder.take('m', 7n);
    expect(batch).toMatchObject({ mirror: 'm', batchId: 7n, endLsn: 120n, rowCount: 2 });
    expect(builder.isEmpty).toBe(true);
    // A batch holding only part of a transaction keeps the previous commit.
    builder.add(table, { transaction, kind: 'insert', newRow: ['3'] }, 140n, 0);
    expect(builder.take('m', 8n).endLsn).toBe(120n);
  });

  it('carries the position of its last change only while that change’s transaction is open', () => {
    const builder = new BatchBuilder({ maxRows: 10, maxBytes: 1e9 }, 100n);
    const position = (changeLsn: bigint) => ({ commitLsn: 200n, changeLsn, changeRank: 1 });
    builder.add(table, { transaction, kind: 'insert', newRow: ['1'] }, 110n, 0, position(110n));
    builder.add(table, { transaction, kind: 'insert', newRow: ['2'] }, 120n, 0, position(120n));
    expect(builder.take('m', 1n)).toMatchObject({ endLsn: 100n, transactionPosition: position(120n) });
    builder.add(table, { transaction, kind: 'insert', newRow: ['3'] }, 130n, 0, position(130n));
    builder.commit(201n);
    const completed = builder.take('m', 2n);
    expect(completed.endLsn).toBe(201n);
    expect(completed.transactionPosition).toBeUndefined();
  });

  it('measures age from its first change and counts no rows for a truncate', () => {
    const builder = new BatchBuilder({ maxRows: 10, maxBytes: 1e9 }, 0n);
    expect(builder.ageMs(5_000)).toBe(0);
    builder.add(table, { transaction, kind: 'truncate' }, 1n, 1_000);
    expect(builder.ageMs(5_000)).toBe(4_000);
    expect(builder.rowCount).toBe(0);
    expect(builder.isEmpty).toBe(false);
  });

  describe('with a destination that holds new rows (Destination.newRowsBuffer)', () => {
    /** Holds rows as given; says each takes 10 bytes. */
    class HeldRows implements NewRowsBuffer {
      readonly rows: RowImage[] = [];
      add(row: RowImage): number {
        this.rows.push(row);
        return 10;
      }
      get rowCount(): number {
        return this.rows.length;
      }
    }
    const other: DestinationTable = { ...table, destination: { schema: 'public', table: 'other' } };
    const holding = (maxBytes = 1e9) => {
      const asked: DestinationTable[] = [];
      const builder = new BatchBuilder({ maxRows: 100, maxBytes }, 0n, (forTable) => {
        asked.push(forTable);
        return new HeldRows();
      });
      return { builder, asked };
    };
    const held = (newRows: NewRowsBuffer | undefined) => (newRows as HeldRows | undefined)?.rows;

    it('gives it each table’s inserts until the table has another change, and keeps the rest in order', () => {
      const { builder, asked } = holding();
      builder.add(table, { transaction, kind: 'insert', newRow: ['1'] }, 10n, 0);
      builder.add(other, { transaction, kind: 'insert', newRow: ['a'] }, 11n, 0);
      builder.add(table, { transaction, kind: 'insert', newRow: ['2'] }, 12n, 0);
      builder.add(table, { transaction, kind: 'delete', oldKey: ['1'] }, 13n, 0);
      builder.add(table, { transaction, kind: 'insert', newRow: ['3'] }, 14n, 0);
      const batch = builder.take('m', 1n);
      expect(asked).toEqual([table, other]);
      expect(batch.rowCount).toBe(5);
      const [first, second] = batch.tables;
      expect(first?.table).toBe(table);
      expect(held(first?.newRows)).toEqual([['1'], ['2']]);
      expect(first?.changes.map((change) => change.kind)).toEqual(['delete', 'insert']);
      expect(second?.table).toBe(other);
      expect(held(second?.newRows)).toEqual([['a']]);
      expect(second?.changes).toEqual([]);
    });

    it('keeps inserts after a truncate as changes, and asks for a new buffer in the next batch', () => {
      const { builder, asked } = holding();
      builder.add(table, { transaction, kind: 'truncate' }, 10n, 0);
      builder.add(table, { transaction, kind: 'insert', newRow: ['1'] }, 11n, 0);
      const truncated = builder.take('m', 1n).tables[0];
      expect(truncated?.newRows).toBeUndefined();
      expect(truncated?.changes.map((change) => change.kind)).toEqual(['truncate', 'insert']);
      builder.add(table, { transaction, kind: 'insert', newRow: ['2'] }, 12n, 0);
      expect(held(builder.take('m', 2n).tables[0]?.newRows)).toEqual([['2']]);
      expect(asked).toEqual([table]);
    });

    it('counts the bytes the buffer reports against the budget', () => {
      const { builder } = holding(30);
      builder.add(table, { transaction, kind: 'insert', newRow: ['x'.repeat(500)] }, 10n, 0);
      builder.add(table, { transaction, kind: 'insert', newRow: ['x'.repeat(500)] }, 11n, 0);
      expect(builder.isFull).toBe(false);
      builder.add(table, { transaction, kind: 'insert', newRow: ['3'] }, 12n, 0);
      expect(builder.isFull).toBe(true);
    });
  });
});

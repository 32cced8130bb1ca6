import { describe, expect, it } from 'vitest';
import { wireTuple } from '../../../test/support/wire-tuple.ts';
import {
  type ChangeBuffer,
  ChangeList,
  type DestinationTable,
  type RowChange,
} from '../connectors/records.ts';
import { rowOfCells } from '../connectors/rows.ts';
import { BatchBuilder } from './batch-builder.ts';

const transaction = { xid: 1, commitLsn: 100n, commitTimeMicros: 0n };

const table: DestinationTable = {
  source: { schema: 'public', table: 't' },
  destination: { schema: 'public', table: 't' },
  columns: [],
  keyColumns: ['id'],
};

/** A builder whose destination holds changes as objects (ChangeList). */
const listing = (maxRows: number, maxBytes: number, durableLsn: bigint) =>
  new BatchBuilder({ maxRows, maxBytes }, durableLsn, () => new ChangeList());

describe('BatchBuilder', () => {
  it('is full at the row limit', () => {
    const builder = listing(2, 1e9, 0n);
    expect(builder.add(table, { transaction, kind: 'insert', newRow: rowOfCells(['1']) }, 10n, () => 0)).toBe(
      true,
    );
    expect(builder.isFull).toBe(false);
    expect(builder.add(table, { transaction, kind: 'insert', newRow: rowOfCells(['2']) }, 11n, () => 0)).toBe(
      false,
    );
    expect(builder.isFull).toBe(true);
  });

  it('is full at the byte budget before the row limit', () => {
    const builder = listing(1_000_000, 100, 0n);
    builder.add(table, { transaction, kind: 'insert', newRow: rowOfCells(['x'.repeat(200)]) }, 10n, () => 0);
    expect(builder.isFull).toBe(true);
  });

  it('acknowledges only the last complete commit, starting from the durable one', () => {
    const builder = listing(10, 1e9, 100n);
    builder.add(table, { transaction, kind: 'insert', newRow: rowOfCells(['1']) }, 110n, () => 0);
    builder.commit(120n);
    builder.add(table, { transaction, kind: 'insert', newRow: rowOfCells(['2']) }, 130n, () => 0);
    const batch = builder.take('m', 7n);
    expect(batch).toMatchObject({ mirror: 'm', batchId: 7n, endLsn: 120n, rowCount: 2 });
    expect(builder.isEmpty).toBe(true);
    // A batch holding only part of a transaction keeps the previous commit.
    builder.add(table, { transaction, kind: 'insert', newRow: rowOfCells(['3']) }, 140n, () => 0);
    expect(builder.take('m', 8n).endLsn).toBe(120n);
  });

  it('carries the position of its last change only while that change’s transaction is open', () => {
    const builder = listing(10, 1e9, 100n);
    const position = (changeLsn: bigint) => ({ commitLsn: 200n, changeLsn, changeRank: 1 });
    builder.add(
      table,
      { transaction, kind: 'insert', newRow: rowOfCells(['1']) },
      110n,
      () => 0,
      position(110n),
    );
    builder.add(
      table,
      { transaction, kind: 'insert', newRow: rowOfCells(['2']) },
      120n,
      () => 0,
      position(120n),
    );
    expect(builder.take('m', 1n)).toMatchObject({ endLsn: 100n, transactionPosition: position(120n) });
    builder.add(
      table,
      { transaction, kind: 'insert', newRow: rowOfCells(['3']) },
      130n,
      () => 0,
      position(130n),
    );
    builder.commit(201n);
    const completed = builder.take('m', 2n);
    expect(completed.endLsn).toBe(201n);
    expect(completed.transactionPosition).toBeUndefined();
  });

  it('reads the clock only when a change opens the batch', () => {
    const builder = listing(10, 1e9, 0n);
    let reads = 0;
    const clock = () => {
      reads++;
      return 1_000 * reads;
    };
    builder.add(table, { transaction, kind: 'insert', newRow: rowOfCells(['1']) }, 10n, clock);
    builder.add(table, { transaction, kind: 'insert', newRow: rowOfCells(['2']) }, 11n, clock);
    builder.add(table, { transaction, kind: 'insert', newRow: wireTuple(['3']) }, 12n, clock);
    expect(reads).toBe(1);
    expect(builder.ageMs(5_000)).toBe(4_000);
    builder.take('m', 1n);
    builder.add(table, { transaction, kind: 'insert', newRow: wireTuple(['4']) }, 13n, clock);
    expect(reads).toBe(2);
    expect(builder.ageMs(5_000)).toBe(3_000);
  });

  it('measures age from its first change and counts no rows for a truncate', () => {
    const builder = listing(10, 1e9, 0n);
    expect(builder.ageMs(5_000)).toBe(0);
    builder.add(table, { transaction, kind: 'truncate' }, 1n, () => 1_000);
    expect(builder.ageMs(5_000)).toBe(4_000);
    expect(builder.rowCount).toBe(0);
    expect(builder.isEmpty).toBe(false);
  });

  describe('with a destination that holds changes (Destination.changeBuffer)', () => {
    /** Holds changes as given; says each takes 10 bytes. */
    class HeldChanges implements ChangeBuffer {
      readonly changes: RowChange[] = [];
      add(change: RowChange): number {
        this.changes.push(change);
        return 10;
      }
    }
    const other: DestinationTable = { ...table, destination: { schema: 'public', table: 'other' } };
    const holding = (maxBytes = 1e9) => {
      const asked: DestinationTable[] = [];
      const builder = new BatchBuilder({ maxRows: 100, maxBytes }, 0n, (forTable) => {
        asked.push(forTable);
        return new HeldChanges();
      });
      return { builder, asked };
    };
    const held = (buffer: ChangeBuffer | undefined) => (buffer as HeldChanges | undefined)?.changes;

    it('gives each table’s changes to one buffer of its own per batch, in order, and keeps none itself', () => {
      const { builder, asked } = holding();
      const changes: [DestinationTable, RowChange][] = [
        [table, { transaction, kind: 'insert', newRow: rowOfCells(['1']) }],
        [other, { transaction, kind: 'insert', newRow: rowOfCells(['a']) }],
        [table, { transaction, kind: 'delete', oldKey: rowOfCells(['1']) }],
        [table, { transaction, kind: 'truncate' }],
        [table, { transaction, kind: 'insert', newRow: rowOfCells(['3']) }],
      ];
      for (const [index, [target, change]] of changes.entries())
        builder.add(target, change, 10n + BigInt(index), () => 0);
      const batch = builder.take('m', 1n);
      expect(asked).toEqual([table, other]);
      expect(batch.rowCount).toBe(4);
      const [first, second] = batch.tables;
      expect(first?.table).toBe(table);
      expect(held(first?.held)).toEqual(
        changes.filter(([target]) => target === table).map(([, change]) => change),
      );
      expect(second?.table).toBe(other);
      expect(held(second?.held)).toEqual([changes[1]?.[1]]);
      builder.add(table, { transaction, kind: 'insert', newRow: rowOfCells(['4']) }, 20n, () => 0);
      expect(held(builder.take('m', 2n).tables[0]?.held)).toHaveLength(1);
      expect(asked).toEqual([table, other, table]);
    });

    it('counts the bytes the buffer reports against the budget', () => {
      const { builder } = holding(30);
      builder.add(
        table,
        { transaction, kind: 'insert', newRow: rowOfCells(['x'.repeat(500)]) },
        10n,
        () => 0,
      );
      builder.add(
        table,
        { transaction, kind: 'insert', newRow: rowOfCells(['x'.repeat(500)]) },
        11n,
        () => 0,
      );
      expect(builder.isFull).toBe(false);
      builder.add(table, { transaction, kind: 'insert', newRow: rowOfCells(['3']) }, 12n, () => 0);
      expect(builder.isFull).toBe(true);
    });

    it('hands a row over the source’s bytes to the buffer as it is, undecoded', () => {
      const { builder } = holding();
      const row = wireTuple(['1', 'b']);
      builder.add(table, { transaction, kind: 'update', oldKey: null, newRow: row }, 10n, () => 0);
      const [change] = held(builder.take('m', 1n).tables[0]?.held) ?? [];
      expect(change).toMatchObject({ kind: 'update', oldKey: null });
      expect(change?.kind === 'update' && change.newRow).toBe(row);
      expect(row.fromSourceBytes).toBe(true);
    });
  });
});

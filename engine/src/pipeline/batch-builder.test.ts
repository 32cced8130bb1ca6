import { describe, expect, it } from 'vitest';
import { wireTuple } from '../../../test/support/wire-tuple.ts';
import type { WireTuple } from '../connectors/changes.ts';
import type { ChangeBuffer, DestinationTable, RowChange } from '../connectors/records.ts';
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
    expect(builder.add(table, { transaction, kind: 'insert', newRow: ['1'] }, 10n, () => 0)).toBe(true);
    expect(builder.isFull).toBe(false);
    expect(builder.add(table, { transaction, kind: 'insert', newRow: ['2'] }, 11n, () => 0)).toBe(false);
    expect(builder.isFull).toBe(true);
  });

  it('is full at the byte budget before the row limit', () => {
    const builder = new BatchBuilder({ maxRows: 1_000_000, maxBytes: 100 }, 0n);
    builder.add(table, { transaction, kind: 'insert', newRow: ['x'.repeat(200)] }, 10n, () => 0);
    expect(builder.isFull).toBe(true);
  });

  it('acknowledges only the last complete commit, starting from the durable one', () => {
    const builder = new BatchBuilder({ maxRows: 10, maxBytes: 1e9 }, 100n);
    builder.add(table, { transaction, kind: 'insert', newRow: ['1'] }, 110n, () => 0);
    builder.commit(120n);
    builder.add(table, { transaction, kind: 'insert', newRow: ['2'] }, 130n, () => 0);
    const batch = builder.take('m', 7n);
    expect(batch).toMatchObject({ mirror: 'm', batchId: 7n, endLsn: 120n, rowCount: 2 });
    expect(builder.isEmpty).toBe(true);
    // A batch holding only part of a transaction keeps the previous commit.
    builder.add(table, { transaction, kind: 'insert', newRow: ['3'] }, 140n, () => 0);
    expect(builder.take('m', 8n).endLsn).toBe(120n);
  });

  it('carries the position of its last change only while that change’s transaction is open', () => {
    const builder = new BatchBuilder({ maxRows: 10, maxBytes: 1e9 }, 100n);
    const position = (changeLsn: bigint) => ({ commitLsn: 200n, changeLsn, changeRank: 1 });
    builder.add(table, { transaction, kind: 'insert', newRow: ['1'] }, 110n, () => 0, position(110n));
    builder.add(table, { transaction, kind: 'insert', newRow: ['2'] }, 120n, () => 0, position(120n));
    expect(builder.take('m', 1n)).toMatchObject({ endLsn: 100n, transactionPosition: position(120n) });
    builder.add(table, { transaction, kind: 'insert', newRow: ['3'] }, 130n, () => 0, position(130n));
    builder.commit(201n);
    const completed = builder.take('m', 2n);
    expect(completed.endLsn).toBe(201n);
    expect(completed.transactionPosition).toBeUndefined();
  });

  it('reads the clock only when a change opens the batch', () => {
    const builder = new BatchBuilder({ maxRows: 10, maxBytes: 1e9 }, 0n);
    let reads = 0;
    const clock = () => {
      reads++;
      return 1_000 * reads;
    };
    builder.add(table, { transaction, kind: 'insert', newRow: ['1'] }, 10n, clock);
    builder.add(table, { transaction, kind: 'insert', newRow: ['2'] }, 11n, clock);
    builder.addTuple('insert', table, transaction, wireTuple(['3']), 12n, clock);
    expect(reads).toBe(1);
    expect(builder.ageMs(5_000)).toBe(4_000);
    builder.take('m', 1n);
    builder.addTuple('insert', table, transaction, wireTuple(['4']), 13n, clock);
    expect(reads).toBe(2);
    expect(builder.ageMs(5_000)).toBe(3_000);
  });

  it('measures age from its first change and counts no rows for a truncate', () => {
    const builder = new BatchBuilder({ maxRows: 10, maxBytes: 1e9 }, 0n);
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
        [table, { transaction, kind: 'insert', newRow: ['1'] }],
        [other, { transaction, kind: 'insert', newRow: ['a'] }],
        [table, { transaction, kind: 'delete', oldKey: ['1'] }],
        [table, { transaction, kind: 'truncate' }],
        [table, { transaction, kind: 'insert', newRow: ['3'] }],
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
      expect(first?.changes).toEqual([]);
      expect(second?.table).toBe(other);
      expect(held(second?.held)).toEqual([changes[1]?.[1]]);
      builder.add(table, { transaction, kind: 'insert', newRow: ['4'] }, 20n, () => 0);
      expect(held(builder.take('m', 2n).tables[0]?.held)).toHaveLength(1);
      expect(asked).toEqual([table, other, table]);
    });

    it('counts the bytes the buffer reports against the budget', () => {
      const { builder } = holding(30);
      builder.add(table, { transaction, kind: 'insert', newRow: ['x'.repeat(500)] }, 10n, () => 0);
      builder.add(table, { transaction, kind: 'insert', newRow: ['x'.repeat(500)] }, 11n, () => 0);
      expect(builder.isFull).toBe(false);
      builder.add(table, { transaction, kind: 'insert', newRow: ['3'] }, 12n, () => 0);
      expect(builder.isFull).toBe(true);
    });

    it('hands an insert given undecoded to a buffer that holds it so, and decoded to any other', () => {
      /** Takes undecoded inserts until it has `room` of them, then declines. */
      class TupleHolder extends HeldChanges {
        readonly tuples: WireTuple[] = [];
        readonly room: number;
        constructor(room: number) {
          super();
          this.room = room;
        }
        addInsertTuple(tuple: WireTuple): number | undefined {
          if (this.tuples.length === this.room) return undefined;
          this.tuples.push(tuple);
          return 7;
        }
      }
      const buffers: TupleHolder[] = [];
      const builder = new BatchBuilder({ maxRows: 100, maxBytes: 1e9 }, 0n, () => {
        const buffer = new TupleHolder(1);
        buffers.push(buffer);
        return buffer;
      });
      const first = wireTuple(['1']);
      const position = { commitLsn: 200n, changeLsn: 11n, changeRank: 1 };
      expect(builder.addTuple('insert', table, transaction, first, 10n, () => 1_000)).toBe(true);
      expect(
        builder.addTuple('insert', table, transaction, wireTuple(['2']), 11n, () => 2_000, position),
      ).toBe(false);
      expect(builder.rowCount).toBe(2);
      expect(builder.ageMs(5_000)).toBe(4_000);
      expect(buffers[0]?.tuples).toEqual([first]);
      expect(buffers[0]?.changes).toEqual([{ transaction, kind: 'insert', newRow: ['2'] }]);
      expect(builder.take('m', 1n)).toMatchObject({ rowCount: 2, transactionPosition: position });

      // Without a buffer of the destination's, the builder keeps the decoded change.
      const plain = new BatchBuilder({ maxRows: 100, maxBytes: 1e9 }, 0n);
      expect(plain.addTuple('insert', table, transaction, wireTuple(['3']), 10n, () => 0)).toBe(true);
      expect(plain.take('m', 1n).tables[0]?.changes).toEqual([
        { transaction, kind: 'insert', newRow: ['3'] },
      ]);
    });

    it('hands an update given undecoded to a buffer that holds it so, and decoded, its key its own, to any other', () => {
      class UpdateHolder extends HeldChanges {
        readonly tuples: WireTuple[] = [];
        addUpdateTuple(tuple: WireTuple): number {
          this.tuples.push(tuple);
          return 5;
        }
      }
      const holder = new UpdateHolder();
      const builder = new BatchBuilder({ maxRows: 100, maxBytes: 1e9 }, 0n, () => holder);
      const tuple = wireTuple(['1', 'b']);
      expect(builder.addTuple('update', table, transaction, tuple, 10n, () => 0)).toBe(true);
      expect(holder.tuples).toEqual([tuple]);
      expect(holder.changes).toEqual([]);
      // A buffer without addUpdateTuple, or none at all, gets the decoded update.
      for (const other of [
        new BatchBuilder({ maxRows: 100, maxBytes: 1e9 }, 0n, () => new HeldChanges()),
        new BatchBuilder({ maxRows: 100, maxBytes: 1e9 }, 0n),
      ]) {
        expect(other.addTuple('update', table, transaction, wireTuple(['2', 'c']), 10n, () => 0)).toBe(true);
        const taken = other.take('m', 1n).tables[0];
        const changes = taken?.changes.length
          ? taken.changes
          : (taken?.held as HeldChanges | undefined)?.changes;
        expect(changes).toEqual([{ transaction, kind: 'update', oldKey: null, newRow: ['2', 'c'] }]);
      }
    });

    it('counts the bytes a buffer reports for an undecoded insert against the budget', () => {
      class TupleBytes extends HeldChanges {
        addInsertTuple(tuple: WireTuple): number {
          return tuple.bytes.length;
        }
      }
      const builder = new BatchBuilder({ maxRows: 100, maxBytes: 30 }, 0n, () => new TupleBytes());
      builder.addTuple('insert', table, transaction, wireTuple(['x'.repeat(10)]), 10n, () => 0);
      expect(builder.isFull).toBe(false);
      builder.addTuple('insert', table, transaction, wireTuple(['x'.repeat(10)]), 11n, () => 0);
      expect(builder.isFull).toBe(true);
    });
  });
});

import { describe, expect, it } from 'vitest';
import { TransactionCursor } from './transaction-cursor.ts';

describe('TransactionCursor', () => {
  it('without a recorded position skips nothing and counts ranks per LSN', () => {
    const cursor = new TransactionCursor(undefined);
    expect(cursor.begin(1000n)).toBe(false);
    expect([10n, 20n, 20n, 20n, 30n].map((lsn) => cursor.next(lsn))).toEqual([
      false,
      false,
      false,
      false,
      false,
    ]);
    expect(cursor.position).toEqual({ commitLsn: 1000n, changeLsn: 30n, changeRank: 1 });
    cursor.next(30n);
    expect(cursor.position).toEqual({ commitLsn: 1000n, changeLsn: 30n, changeRank: 2 });
  });

  it('skips the changes of its transaction up to the position, rank included', () => {
    const cursor = new TransactionCursor({ commitLsn: 1000n, changeLsn: 20n, changeRank: 2 });
    expect(cursor.begin(1000n)).toBe(true);
    expect([10n, 20n, 20n, 20n, 30n].map((lsn) => cursor.next(lsn))).toEqual([
      true,
      true,
      true,
      false,
      false,
    ]);
    expect(cursor.position).toEqual({ commitLsn: 1000n, changeLsn: 30n, changeRank: 1 });
  });

  it('skips nothing of other transactions, before or after its own', () => {
    const cursor = new TransactionCursor({ commitLsn: 1000n, changeLsn: 20n, changeRank: 1 });
    expect(cursor.begin(900n)).toBe(false);
    expect(cursor.next(10n)).toBe(false);
    cursor.end();
    expect(cursor.begin(1000n)).toBe(true);
    expect(cursor.next(20n)).toBe(true);
    cursor.end();
    // Once its transaction is over the position is forgotten, even if it came again.
    expect(cursor.begin(1000n)).toBe(false);
    expect(cursor.next(20n)).toBe(false);
  });

  it('a transaction that ends before reaching the position keeps nothing skipped afterwards', () => {
    const cursor = new TransactionCursor({ commitLsn: 1000n, changeLsn: 50n, changeRank: 1 });
    cursor.begin(1000n);
    expect(cursor.next(10n)).toBe(true);
    cursor.end();
    cursor.begin(2000n);
    expect(cursor.next(10n)).toBe(false);
  });
});

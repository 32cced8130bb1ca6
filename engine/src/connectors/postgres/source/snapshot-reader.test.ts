import { describe, expect, it } from 'vitest';
import { partitionCopyCommand } from './snapshot-reader.ts';

const table = { schema: 'public', table: 'Orders' };

describe('partitionCopyCommand', () => {
  it('reads a whole table without a ctid filter', () => {
    expect(partitionCopyCommand(table, ['id'], { fromPage: 0, toPage: null })).toBe(
      'COPY (SELECT "id" FROM "public"."Orders") TO STDOUT',
    );
  });

  it('bounds middle partitions on both sides and leaves the last one open', () => {
    expect(partitionCopyCommand(table, ['id', 'a"b'], { fromPage: 10, toPage: 20 })).toBe(
      `COPY (SELECT "id", "a""b" FROM "public"."Orders" WHERE ctid >= '(10,0)'::tid AND ctid < '(20,0)'::tid) TO STDOUT`,
    );
    expect(partitionCopyCommand(table, ['id'], { fromPage: 20, toPage: null })).toBe(
      `COPY (SELECT "id" FROM "public"."Orders" WHERE ctid >= '(20,0)'::tid) TO STDOUT`,
    );
  });
});

describe('partitionCopyCommand of a partitioned table', () => {
  it('reads the leaf partition a range belongs to, by the mapped table’s column names', () => {
    const leaf = { schema: 'sales', table: 'orders_2026' };
    expect(partitionCopyCommand(table, ['id', 'k'], { fromPage: 0, toPage: 8, leaf })).toBe(
      `COPY (SELECT "id", "k" FROM "sales"."orders_2026" WHERE ctid < '(8,0)'::tid) TO STDOUT`,
    );
  });
});

import { describe, expect, it } from 'vitest';
import type { DestinationTable, SourceColumn } from '../../connectors/records.ts';
import { rowOfCells } from '../../connectors/rows.ts';
import { compareKeys, KeySet, keyOfRow, keyOrderOf } from './key-order.ts';

function column(name: string, typeOid: number): SourceColumn {
  return { name, typeOid, typeModifier: -1, typeName: String(typeOid), notNull: true };
}

function table(columns: SourceColumn[], keyColumns: string[]): DestinationTable {
  const name = { schema: 'public', table: 't' };
  return { source: name, destination: name, columns, keyColumns };
}

describe('key order', () => {
  it('orders integer keys by value, negatives and lengths included', () => {
    const order = keyOrderOf(table([column('id', 20)], ['id']));
    if (!order) throw new Error('orderable');
    const sorted = ['10', '-3', '2', '-20', '0', '9223372036854775807', '-9223372036854775808'].sort((a, b) =>
      compareKeys(order, [a], [b]),
    );
    expect(sorted).toEqual(['-9223372036854775808', '-20', '-3', '0', '2', '10', '9223372036854775807']);
  });

  it('orders text by UTF-8 bytes (COLLATE "C"), not by UTF-16 code units', () => {
    const order = keyOrderOf(table([column('k', 25)], ['k']));
    if (!order) throw new Error('orderable');
    const values = ['b', 'a', 'B', '\u{1F600}', '\uFFFD', 'ab', ''];
    const sorted = [...values].sort((a, b) => compareKeys(order, [a], [b]));
    const byBytes = [...values].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    expect(sorted).toEqual(byBytes);
  });

  it('compares bpchar without trailing spaces, and composite keys column by column', () => {
    const order = keyOrderOf(table([column('a', 1042), column('b', 23)], ['a', 'b']));
    if (!order) throw new Error('orderable');
    expect(compareKeys(order, ['x  ', '1'], ['x', '1'])).toBe(0);
    expect(compareKeys(order, ['a\t', '9'], ['a  ', '1'])).toBeGreaterThan(0);
    expect(compareKeys(order, ['x', '2'], ['x', '10'])).toBeLessThan(0);
  });

  it('orders uuids by their bytes', () => {
    const order = keyOrderOf(table([column('u', 2950)], ['u']));
    if (!order) throw new Error('orderable');
    expect(
      compareKeys(order, ['0000000a-0000-0000-0000-000000000000'], ['00000009-ffff-0000-0000-000000000000']),
    ).toBeGreaterThan(0);
  });

  it('refuses keys of other types, no key, and a key column not replicated', () => {
    expect(keyOrderOf(table([column('n', 1700)], ['n']))).toBeUndefined();
    expect(keyOrderOf(table([column('id', 23)], []))).toBeUndefined();
    expect(keyOrderOf(table([column('v', 23)], ['id']))).toBeUndefined();
  });

  it('reads the key of a row and keeps sets of keys', () => {
    const t = table([column('v', 25), column('id', 23)], ['id']);
    const order = keyOrderOf(t);
    if (!order) throw new Error('orderable');
    expect(keyOfRow(rowOfCells(['x', '7']), order)).toEqual(['7']);
    expect(keyOfRow(rowOfCells(['x', null]), order)).toBeUndefined();
    const set = new KeySet();
    set.add(['1', 'a']);
    expect(set.has(['1', 'a'])).toBe(true);
    expect(set.has(['1a'])).toBe(false);
  });
});

// The order of a table's primary key as the engine compares it itself, for
// the online backfill (docs/engine.md, "Tables added to a running mirror"):
// the chunks are read from the source in this order (keyset pagination), and
// every streamed change is placed before or after the backfill's frontier by
// it. Both must agree exactly, so only key types whose order the engine can
// reproduce from their text output take part:
// - integers (int2, int4, int8, oid): by numeric value;
// - uuid: PostgreSQL orders uuids by their 16 bytes, which is the order of
//   their canonical lowercase hex text;
// - text, varchar, name, bpchar: by the bytes of their UTF-8 text, which is
//   what `COLLATE "C"` orders them by in a UTF-8 database (the source reads
//   the chunks `ORDER BY … COLLATE "C"`). bpchar compares without its
//   trailing spaces, as PostgreSQL's bpchar comparison does.
// A key of any other type (or no key) keeps the load before streaming.
import type { DestinationTable, Row, TupleCell } from '../../connectors/records.ts';
import { keyIndexes } from '../../connectors/records.ts';

/** How one key column's text values are compared. */
export type KeyColumnOrder = 'integer' | 'uuid' | 'bytes' | 'bpchar';

const keyOrderByTypeOid: ReadonlyMap<number, KeyColumnOrder> = new Map([
  [21, 'integer'], // int2
  [23, 'integer'], // int4
  [20, 'integer'], // int8
  [26, 'integer'], // oid
  [2950, 'uuid'],
  [25, 'bytes'], // text
  [1043, 'bytes'], // varchar
  [19, 'bytes'], // name
  [1042, 'bpchar'],
]);

/** A key value: the key columns' text output, in key column order. Never null (key columns are NOT NULL). */
export type KeyValue = readonly string[];

/** A table's key order: how each key column compares, and where it is in the table's rows. */
export interface KeyOrder {
  readonly columns: readonly KeyColumnOrder[];
  /** Positions of the key columns in `DestinationTable.columns`. */
  readonly indexes: readonly number[];
}

/**
 * The key order of `table`, or undefined when the engine cannot order its key
 * (no key, a key column not replicated, or of a type not listed above).
 */
export function keyOrderOf(table: DestinationTable): KeyOrder | undefined {
  if (table.keyColumns.length === 0) return undefined;
  const indexes = keyIndexes(table);
  const columns: KeyColumnOrder[] = [];
  for (const index of indexes) {
    const order = index < 0 ? undefined : keyOrderByTypeOid.get(table.columns[index]?.typeOid ?? 0);
    if (!order) return undefined;
    columns.push(order);
  }
  return { columns, indexes };
}

/** Whether a key column's values are text the source must order `COLLATE "C"`. */
export function isByteOrdered(order: KeyColumnOrder): boolean {
  return order === 'bytes' || order === 'bpchar';
}

/**
 * The key of a row image, or undefined when a key cell is not text (null, or
 * an unchanged-TOAST marker: neither occurs in a key PostgreSQL sent).
 */
export function keyOfRow(row: Row, order: KeyOrder): KeyValue | undefined {
  const key: string[] = [];
  for (const index of order.indexes) {
    const cell: TupleCell = row.cell(index);
    if (typeof cell !== 'string') return undefined;
    key.push(cell);
  }
  return key;
}

/** Negative, zero or positive as `a` sorts before, with or after `b`. */
export function compareKeys(order: KeyOrder, a: KeyValue, b: KeyValue): number {
  for (let column = 0; column < order.columns.length; column++) {
    const compared = compareColumn(order.columns[column] ?? 'bytes', a[column] ?? '', b[column] ?? '');
    if (compared !== 0) return compared;
  }
  return 0;
}

function compareColumn(order: KeyColumnOrder, a: string, b: string): number {
  switch (order) {
    case 'integer':
      return compareIntegerText(a, b);
    case 'uuid':
      return compareCodePoints(a.toLowerCase(), b.toLowerCase());
    case 'bytes':
      return compareCodePoints(a, b);
    case 'bpchar':
      return compareCodePoints(a.replace(/ +$/, ''), b.replace(/ +$/, ''));
  }
}

/** Integers in their decimal text output (an optional `-`, no leading zeros): compared without parsing. */
function compareIntegerText(a: string, b: string): number {
  const aNegative = a.startsWith('-');
  const bNegative = b.startsWith('-');
  if (aNegative !== bNegative) return aNegative ? -1 : 1;
  const magnitude = a.length !== b.length ? a.length - b.length : a < b ? -1 : a > b ? 1 : 0;
  return aNegative ? -magnitude : magnitude;
}

/**
 * UTF-8 byte order equals code point order; JavaScript's `<` compares UTF-16
 * code units, which puts U+E000–U+FFFF after the surrogate pairs of U+10000
 * and up. Compared by code point instead.
 */
function compareCodePoints(a: string, b: string): number {
  if (a === b) return 0;
  const length = Math.min(a.length, b.length);
  for (let index = 0; index < length; index++) {
    const x = a.charCodeAt(index);
    const y = b.charCodeAt(index);
    if (x === y) continue;
    const xSurrogate = x >= 0xd800 && x <= 0xdfff;
    const ySurrogate = y >= 0xd800 && y <= 0xdfff;
    // A surrogate (a code point of U+10000 and up) sorts after every BMP character.
    if (xSurrogate !== ySurrogate) return xSurrogate ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}

/** A set of keys: by their text, joined with a separator no text output holds. */
export class KeySet {
  readonly #keys = new Map<string, KeyValue>();

  static id(key: KeyValue): string {
    return key.join('\u0000');
  }

  get size(): number {
    return this.#keys.size;
  }

  has(key: KeyValue): boolean {
    return this.#keys.has(KeySet.id(key));
  }

  add(key: KeyValue): void {
    this.#keys.set(KeySet.id(key), key);
  }

  delete(key: KeyValue): void {
    this.#keys.delete(KeySet.id(key));
  }

  values(): KeyValue[] {
    return [...this.#keys.values()];
  }
}

// A row as COPY text, the form the PostgreSQL destination writes every row of
// a batch in: whole lines for new rows COPYed into the table itself
// (copy-rows.ts), and the row part of the stage lines upserts and deletes are
// applied from (postgres/destination/staged-changes.ts). One encoder, over the
// row's TupleData (records.ts, Row.tupleData): the source's bytes are escaped
// as they are copied, with no string made per cell.
import { EngineError } from '../errors.ts';
import { formatTableName, type TableName } from '../resources/mirror.ts';
import { type TupleData, tupleCellKind } from './changes.ts';
import { copyBytes, writeCopyEscaped } from './copy-text.ts';
import type { DestinationTable, Row } from './records.ts';

/**
 * The most bytes `writeTupleLine` takes for `tuple`: a text value's bytes at
 * most double when escaped, and its 5-byte header in the tuple pays for its
 * tab; a null's 1 byte in the tuple becomes `\N` and a tab.
 */
export function tupleLineMaxBytes(tuple: TupleData): number {
  return 2 * tuple.bytes.length + tuple.cellCount + 1;
}

/**
 * Built-in types whose text output never holds a byte COPY text escapes (tab,
 * newline, carriage return, backslash): integers, oid, floats, numeric,
 * boolean, uuid, dates, times and intervals in every DateStyle and
 * IntervalStyle, network and MAC addresses. Their values are copied as they
 * are, without looking each byte up. By OID only: a domain, or a user type
 * however named, is escaped like any other value.
 */
const escapeFreeTypeOids: ReadonlySet<number> = new Set([
  21, // int2
  23, // int4
  20, // int8
  26, // oid
  700, // float4
  701, // float8
  1700, // numeric
  16, // bool
  2950, // uuid
  1082, // date
  1083, // time
  1266, // timetz
  1114, // timestamp
  1184, // timestamptz
  1186, // interval
  869, // inet
  650, // cidr
  829, // macaddr
  774, // macaddr8
]);

const escapeFreeColumnsCache = new WeakMap<DestinationTable, Uint8Array>();

/** Per column of `table`, 1 where its values never need COPY text's escapes (computed once per table object). */
function escapeFreeColumns(table: DestinationTable): Uint8Array {
  let flags = escapeFreeColumnsCache.get(table);
  if (!flags) {
    flags = Uint8Array.from(table.columns, (column) => (escapeFreeTypeOids.has(column.typeOid) ? 1 : 0));
    escapeFreeColumnsCache.set(table, flags);
  }
  return flags;
}

const tab = 0x09;
const newline = 0x0a;
const backslash = 0x5c;
const capitalN = 0x4e;
/**
 * Writes a wire tuple's row as a whole COPY text line at `offset` of `target`
 * (at least `tupleLineMaxBytes` free); returns where the line ends. Its cells
 * are the table's columns in order. Text values are PostgreSQL's text output,
 * which COPY text reads back unchanged once its four escapes are applied; they
 * are ASCII bytes, never part of a multi-byte UTF-8 character, so the bytes are
 * escaped as they are, with no string made.
 */
export function writeTupleLine(
  table: DestinationTable,
  tuple: TupleData,
  target: Buffer,
  offset: number,
): number {
  const source = tuple.bytes;
  const escapeFree = escapeFreeColumns(table);
  let read = 2; // past the cell count
  let write = offset;
  for (let cell = 0; cell < tuple.cellCount; cell++) {
    if (cell > 0) target[write++] = tab;
    const kind = source[read++];
    if (kind === tupleCellKind.text) {
      const start = read + 4;
      // The Int32 length, read inline: Buffer#readUInt32BE's checks showed in the profile.
      read =
        start +
        (((source[read] as number) << 24) |
          ((source[read + 1] as number) << 16) |
          ((source[read + 2] as number) << 8) |
          (source[read + 3] as number));
      write =
        escapeFree[cell] === 1
          ? copyBytes(source, start, read, target, write)
          : writeCopyEscaped(source, start, read, target, write);
    } else if (kind === tupleCellKind.null || kind === tupleCellKind.unchangedToast) {
      target[write++] = backslash;
      target[write++] = capitalN;
    } else {
      throw binaryValueError(table.destination);
    }
  }
  target[write++] = newline;
  return write;
}

/** A row's whole COPY text line, in a buffer of its own. */
export function rowCopyLine(table: DestinationTable, row: Row): Buffer {
  const tuple = row.tupleData();
  const line = Buffer.allocUnsafe(tupleLineMaxBytes(tuple));
  return line.subarray(0, writeTupleLine(table, tuple, line, 0));
}

/** A binary cell where text was asked for: the source streams text only. */
export function binaryValueError(table: TableName): EngineError {
  return new EngineError('decode', `binary tuple value in ${formatTableName(table)}; text format expected`);
}

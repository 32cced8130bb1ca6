// A row as COPY text, the form the PostgreSQL destination writes every row of
// a batch in: whole lines for new rows COPYed into the table itself
// (copy-rows.ts), and the row part of the stage lines upserts and deletes are
// applied from (postgres/staged-changes.ts). The ClickHouse destination holds
// new rows this way too and sends them on as TabSeparated. This is hot:
// strings are concatenated, not joined from arrays.
import { EngineError } from '../errors.ts';
import { formatTableName, type TableName } from '../resources/mirror.ts';
import { tupleCellKind, type WireTuple } from './changes.ts';
import { copyNull, escapeCopyText, writeCopyEscaped } from './copy-text.ts';
import { type DestinationTable, isUnchangedToast, type RowImage } from './records.ts';

/** A whole row's COPY text line, for the target table itself. */
export function rowLine(table: DestinationTable, row: RowImage): string {
  return `${rowFields(table, row)}\n`;
}

/**
 * The most bytes `writeTupleLine` takes for `tuple`: a text value's bytes at
 * most double when escaped, and its 5-byte header in the tuple pays for its
 * tab; a null's 1 byte in the tuple becomes `\N` and a tab.
 */
export function tupleLineMaxBytes(tuple: WireTuple): number {
  return 2 * tuple.bytes.length + tuple.cellCount + 1;
}

const tab = 0x09;
const newline = 0x0a;
const backslash = 0x5c;
const capitalN = 0x4e;
/**
 * Writes a wire tuple's row as a whole COPY text line at `offset` of `target`
 * (at least `tupleLineMaxBytes` free); returns where the line ends. Text values
 * are PostgreSQL's text output, which COPY text reads back unchanged once its
 * four escapes are applied; they are ASCII bytes, never part of a multi-byte
 * UTF-8 character, so the bytes are escaped as they are, with no string made.
 * The same line as `rowLine` of the decoded cells.
 */
export function writeTupleLine(
  table: DestinationTable,
  tuple: WireTuple,
  target: Buffer,
  offset: number,
): number {
  const source = tuple.bytes;
  let read = 2; // past the cell count
  let write = offset;
  for (let cell = 0; cell < tuple.cellCount; cell++) {
    if (cell > 0) target[write++] = tab;
    const kind = source[read++];
    if (kind === tupleCellKind.text) {
      const start = read + 4;
      read = start + source.readUInt32BE(read);
      write = writeCopyEscaped(source, start, read, target, write);
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

/** A binary cell where text was asked for: the source streams text only. */
export function binaryValueError(table: TableName): EngineError {
  return new EngineError('decode', `binary tuple value in ${formatTableName(table)}; text format expected`);
}

/** A row's fields in COPY text, tab-separated (built by concatenation: this runs for every row). */
export function rowFields(table: DestinationTable, row: RowImage): string {
  let line = '';
  for (let index = 0; index < table.columns.length; index++) {
    const cell = row[index];
    let field: string;
    if (typeof cell === 'string') field = escapeCopyText(cell);
    else if (cell === null || cell === undefined || isUnchangedToast(cell)) field = copyNull;
    else throw binaryValueError(table.destination);
    line = index === 0 ? field : `${line}\t${field}`;
  }
  return line;
}

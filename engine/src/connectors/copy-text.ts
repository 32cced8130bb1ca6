// PostgreSQL COPY text format: one line per row, tab-separated, `\N` for null,
// and backslash escapes for backslash, newline, carriage return and tab
// (https://www.postgresql.org/docs/current/sql-copy.html#id-1.9.3.55.9.2).
import { EngineError } from '../errors.ts';
import { formatTableName, type TableName } from '../resources/mirror.ts';

const needsEscape = /[\\\n\r\t]/;

export function escapeCopyText(value: string): string {
  if (!needsEscape.test(value)) return value;
  let escaped = '';
  for (const char of value) {
    if (char === '\\') escaped += '\\\\';
    else if (char === '\n') escaped += '\\n';
    else if (char === '\r') escaped += '\\r';
    else if (char === '\t') escaped += '\\t';
    else escaped += char;
  }
  return escaped;
}

/**
 * The same four escapes by byte: the letter after the backslash, or 0 for a
 * byte written as it is. Bytes, since none of the four occurs inside a
 * multi-byte UTF-8 character.
 */
export const copyEscapeLetters = new Uint8Array(256);
copyEscapeLetters[0x5c] = 0x5c; // \\
copyEscapeLetters[0x0a] = 0x6e; // \n
copyEscapeLetters[0x0d] = 0x72; // \r
copyEscapeLetters[0x09] = 0x74; // \t

/**
 * Writes bytes [start, end) of `source` with those four escapes at `offset`
 * of `target` (at least twice their length free); returns where they end.
 * Most values hold none of the four: the bytes before the first one are found
 * by a read-only scan and copied at once, which costs about half of writing
 * every byte through the escape table (docs/benchmarks.md, "COPY lines
 * written by the column's type").
 */
export function writeCopyEscaped(
  source: Buffer,
  start: number,
  end: number,
  target: Buffer,
  offset: number,
): number {
  let clean = start;
  while (clean < end && copyEscapeLetters[source[clean] as number] === 0) clean++;
  let write = copyBytes(source, start, clean, target, offset);
  for (let read = clean; read < end; read++) {
    const byte = source[read] as number;
    const escapeLetter = copyEscapeLetters[byte] as number;
    if (escapeLetter === 0) {
      target[write++] = byte;
    } else {
      target[write++] = 0x5c; // a backslash
      target[write++] = escapeLetter;
    }
  }
  return write;
}

/**
 * Below this many bytes a loop copies faster than Buffer#copy, whose call
 * costs about what a loop spends on 16 bytes (measured on Node 24).
 */
const nativeCopyMinBytes = 16;

/** Writes bytes [start, end) of `source` as they are at `offset` of `target`; returns where they end. */
export function copyBytes(
  source: Buffer,
  start: number,
  end: number,
  target: Buffer,
  offset: number,
): number {
  if (end - start >= nativeCopyMinBytes) return offset + source.copy(target, offset, start, end);
  let write = offset;
  for (let read = start; read < end; read++) target[write++] = source[read] as number;
  return write;
}

export const copyNull = '\\N';

/** A text[] literal of plain names, for COPY: `{"a","b"}` with quotes and backslashes escaped. */
export function textArrayLiteral(values: readonly string[]): string {
  return `{${values.map((value) => `"${value.replace(/[\\"]/g, (char) => `\\${char}`)}"`).join(',')}}`;
}

const escapes: Record<string, string> = { b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v', '\\': '\\' };

/**
 * Splits one COPY text line (without its newline) into fields: `\N` is null,
 * backslash escapes are decoded (including octal `\123` and hex `\x41`).
 */
export function parseCopyTextLine(line: string): (string | null)[] {
  const fields: (string | null)[] = [];
  for (const raw of line.split('\t')) {
    if (raw === '\\N') {
      fields.push(null);
      continue;
    }
    if (!raw.includes('\\')) {
      fields.push(raw);
      continue;
    }
    let value = '';
    for (let index = 0; index < raw.length; index++) {
      const char = raw[index] ?? '';
      if (char !== '\\') {
        value += char;
        continue;
      }
      const next = raw[index + 1] ?? '';
      const octal = /^[0-7]{1,3}/.exec(raw.slice(index + 1, index + 4))?.[0];
      const hex = next === 'x' ? /^[0-9a-fA-F]{1,2}/.exec(raw.slice(index + 2, index + 4))?.[0] : undefined;
      if (octal) {
        value += String.fromCharCode(Number.parseInt(octal, 8));
        index += octal.length;
      } else if (hex) {
        value += String.fromCharCode(Number.parseInt(hex, 16));
        index += 1 + hex.length;
      } else {
        value += escapes[next] ?? next;
        index += 1;
      }
    }
    fields.push(value);
  }
  return fields;
}

/**
 * A COPY text stream as blocks of whole lines, a block per chunk read: each
 * block ends with a newline (one is added to a last line without it). Lines
 * are split on the newline byte, which never occurs inside a multi-byte UTF-8
 * character, so a block can be decoded at once; the rest of a chunk waits for
 * the next one.
 */
export async function* copyTextLineBlocks(stream: AsyncIterable<Buffer | string>): AsyncGenerator<Buffer> {
  // The start of a line not yet ended, as the chunks it came in, joined once
  // when its newline comes: joining it again with every chunk copied a long
  // line once per chunk (a 100 MB value in 64 KiB chunks, ~80 GB of copying).
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  for await (const chunk of stream) {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    const lastNewline = bytes.lastIndexOf(10);
    if (lastNewline === -1) {
      if (bytes.length > 0) {
        pending.push(bytes);
        pendingBytes += bytes.length;
      }
      continue;
    }
    const lines = bytes.subarray(0, lastNewline + 1);
    if (pendingBytes > 0) {
      pending.push(lines);
      yield Buffer.concat(pending, pendingBytes + lines.length);
    } else {
      yield lines;
    }
    const rest = bytes.subarray(lastNewline + 1);
    pending = rest.length > 0 ? [rest] : [];
    pendingBytes = rest.length;
  }
  if (pendingBytes > 0) yield Buffer.concat([...pending, Buffer.from('\n')]);
}

/** The table a COPY stream holds: its name and columns, for the width of its rows. */
export interface CopyTable {
  readonly source: TableName;
  readonly columns: readonly unknown[];
}

/** A COPY row whose field count is not the table's: the stream and the table disagree. */
export function copyRowWidthError(table: CopyTable, fields: number): EngineError {
  return new EngineError(
    'decode',
    `a COPY row of ${formatTableName(table.source)} has ${fields} fields, not ${table.columns.length}`,
  );
}

/**
 * The rows of a COPY text stream of `table`, a batch per block of lines: a
 * snapshot reads millions of rows, and an async step per row (or a UTF-8
 * decode per line) cost more than parsing them. Every row is checked to have
 * one field per column.
 */
export async function* copyTextRowBatches(
  stream: AsyncIterable<Buffer | string>,
  table: CopyTable,
): AsyncGenerator<(string | null)[][]> {
  const width = table.columns.length;
  for await (const block of copyTextLineBlocks(stream)) {
    const rows = parseCopyTextLines(block);
    for (const row of rows) if (row.length !== width) throw copyRowWidthError(table, row.length);
    yield rows;
  }
}

/** The rows of a block of whole COPY text lines, each ending with a newline: one UTF-8 decode for the block. */
export function parseCopyTextLines(block: Buffer): (string | null)[][] {
  return block
    .toString('utf8', 0, block.length - 1)
    .split('\n')
    .map(parseCopyTextLine);
}

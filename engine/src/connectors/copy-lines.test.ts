import { describe, expect, it } from 'vitest';
import { seededRandom } from '../../../test/support/seeded-random.ts';
import { textTable, typedColumn } from '../../../test/support/text-table.ts';
import { wireTuple } from '../../../test/support/wire-tuple.ts';
import { rowCopyLine, tupleLineMaxBytes, writeTupleLine } from './copy-lines.ts';
import { escapeCopyText, parseCopyTextLine } from './copy-text.ts';
import { type DestinationTable, type RowImage, type TupleCell, unchangedToast } from './records.ts';
import { rowOfCells } from './rows.ts';

const table = textTable(['id', 'note', 'big']);

/** A row's COPY text line as the format describes it, escaped per value: what the encoder must write. */
function referenceLine(row: RowImage): string {
  return `${row.map((cell) => (typeof cell === 'string' ? escapeCopyText(cell) : '\\N')).join('\t')}\n`;
}

/** The line the one encoder writes for a row of decoded cells. */
function rowLine(onTable: DestinationTable, row: RowImage): string {
  return rowCopyLine(onTable, rowOfCells(row)).toString('utf8');
}

describe('rowCopyLine', () => {
  it('writes a line that COPY reads back as the same cells', () => {
    const rows = [
      ['1', 'tab\there, new\nline, back\\slash, cr\r', null],
      ['2', '', 'é ✓'],
    ];
    const lines = rows.map((row) => rowLine(table, row));
    expect(lines.every((line) => line.endsWith('\n'))).toBe(true);
    expect(lines.map((line) => parseCopyTextLine(line.slice(0, -1)))).toEqual(rows);
  });

  it('refuses a binary cell: the destination reads text only', () => {
    expect(() => rowLine(table, ['1', Buffer.from('x'), null])).toThrow(/binary tuple value/);
  });
});

/** writeTupleLine's line for `cells`, written into a buffer of exactly the bound it gives. */
function tupleLine(cells: readonly TupleCell[]): string {
  const tuple = wireTuple(cells);
  const target = Buffer.alloc(tupleLineMaxBytes(tuple) + 4, 0xff);
  const end = writeTupleLine(
    textTable(cells.map((_, index) => (index === 0 ? 'id' : `c${index}`))),
    tuple,
    target,
    4,
  );
  expect(end).toBeLessThanOrEqual(target.length);
  return target.toString('utf8', 4, end);
}

describe('writeTupleLine', () => {
  it('writes the line the format describes, escapes and UTF-8 included, from bytes and from decoded cells alike', () => {
    const rows: RowImage[] = [
      ['1', 'tab\there, new\nline, back\\slash, cr\r', null],
      ['2', '', 'é ✓ 日本語'],
      ['\\\\', '\n\n', '\t'],
      ['3', 'a value long enough to hold every escape \\ \t \n \r and then some', null],
    ];
    for (const row of rows) {
      expect(tupleLine(row)).toBe(referenceLine(row));
      expect(rowLine(textTable(['id', 'c1', 'c2']), row)).toBe(referenceLine(row));
    }
  });

  it('writes an unchanged TOAST value as null, as the format says, and nothing for no cells', () => {
    expect(tupleLine(['1', unchangedToast])).toBe('1\t\\N\n');
    expect(tupleLine([])).toBe('\n');
  });

  it('stays within its bound for any text, and matches the format (seeded random rows)', () => {
    const random = seededRandom(16);
    const alphabet = ['a', 'Z', '0', ' ', '\\', '\t', '\n', '\r', 'é', '✓', '𝄞', '\u000b'];
    for (let round = 0; round < 500; round++) {
      const row: TupleCell[] = Array.from({ length: 1 + Math.floor(random() * 6) }, () => {
        if (random() < 0.15) return null;
        // Up to 40 characters: short values are copied by a loop, longer ones at once.
        return Array.from(
          { length: Math.floor(random() * 40) },
          () => alphabet[Math.floor(random() * alphabet.length)],
        ).join('');
      });
      const _table = textTable(row.map((_, index) => (index === 0 ? 'id' : `c${index}`)));
      expect(tupleLine(row)).toBe(referenceLine(row));
    }
  });

  it('copies the values of types whose output needs no escape as they are, and escapes any other type', () => {
    const typed: DestinationTable = {
      ...textTable(['id']),
      // int8, numeric, timestamptz, uuid; then a type not known to need no escape (an enum, a domain).
      columns: [20, 1700, 1184, 2950, 16_384].map((typeOid, index) =>
        typedColumn(index === 0 ? 'id' : `c${index}`, typeOid),
      ),
    };
    const row = [
      '-9223372036854775808',
      '12345678901234567890.0123456789',
      '2026-11-29 19:58:24.123456+00',
      'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
      'tab\there',
    ];
    const tuple = wireTuple(row);
    const target = Buffer.alloc(tupleLineMaxBytes(tuple));
    const end = writeTupleLine(typed, tuple, target, 0);
    expect(target.toString('utf8', 0, end)).toBe(`${row.slice(0, 4).join('\t')}\ttab\\there\n`);
    expect(target.toString('utf8', 0, end)).toBe(referenceLine(row));
  });

  it('refuses a binary cell, as rowLine does', () => {
    const tuple = wireTuple(['1', Buffer.from('x')]);
    expect(() => writeTupleLine(textTable(['id', 'b']), tuple, Buffer.alloc(64), 0)).toThrow(
      /binary tuple value/,
    );
  });
});

import { describe, expect, it } from 'vitest';
import { textTable } from '../../../test/support/text-table.ts';
import { copyChunkBytes } from './copy-chunks.ts';
import { CopyTextRows } from './copy-rows.ts';
import { parseCopyTextLine } from './copy-text.ts';
import { rowOfCells } from './rows.ts';

const table = textTable(['id', 'note']);

/** The rows COPY would read from `chunks`, in order. */
function readBack(chunks: readonly Buffer[]): (string | null)[][] {
  const text = Buffer.concat(chunks).toString('utf8');
  return text
    .split('\n')
    .slice(0, -1)
    .map((line) => parseCopyTextLine(line));
}

describe('CopyTextRows', () => {
  it('holds rows as COPY text that reads back as the same rows, in order', () => {
    const rows = [
      ['1', 'tab\there'],
      ['2', null],
      ['3', 'é ✓ and a back\\slash'],
    ];
    const held = new CopyTextRows(table);
    const sizes = rows.map((row) => held.add(rowOfCells(row)));
    expect(sizes).toEqual(
      rows.map(
        (row) =>
          Buffer.byteLength(`${row.map((cell) => cell ?? '\\N').join('\t')}\n`) +
          (row[1]?.match(/[\t\\]/g)?.length ?? 0),
      ),
    );
    expect(readBack(held.chunks())).toEqual(rows);
  });

  it('seals chunks of about copyChunkBytes that each end on a line end, and can be read again', () => {
    const held = new CopyTextRows(table);
    // Multi-byte characters: each line is written as UTF-8 into a chunk that has room for its bound.
    const rows = Array.from({ length: 5_000 }, (_, index) => [String(index), `ü${'x'.repeat(40)}✓`]);
    for (const row of rows) held.add(rowOfCells(row));
    const chunks = held.chunks();
    expect(chunks.length).toBeGreaterThan(2);
    for (const chunk of chunks) expect(chunk.at(-1)).toBe(0x0a);
    // A chunk is sealed when full, or when the next line's bound (at most twice its TupleData) does not fit.
    for (const chunk of chunks.slice(0, -1)) expect(chunk.length).toBeGreaterThan(copyChunkBytes - 200);
    expect(readBack(chunks)).toEqual(rows);
    expect(held.chunks()).toBe(chunks);
    expect(readBack(held.chunks())).toEqual(rows);
  });

  it('holds nothing until a row is added', () => {
    const held = new CopyTextRows(table);
    expect(held.chunks()).toEqual([]);
  });
});

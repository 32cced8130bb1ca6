import { describe, expect, it } from 'vitest';
import { textTable } from '../../../test/support/text-table.ts';
import { copyChunkBytes } from './copy-chunks.ts';
import { rowLine } from './copy-lines.ts';
import { CopyTextRows } from './copy-rows.ts';
import { parseCopyTextLine } from './copy-text.ts';

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
    const sizes = rows.map((row) => held.add(row));
    expect(sizes).toEqual(rows.map((row) => rowLine(table, row).length));
    expect(readBack(held.chunks())).toEqual(rows);
  });

  it('seals chunks of about copyChunkBytes that each end on a line end, and can be read again', () => {
    const held = new CopyTextRows(table);
    // Multi-byte characters: chunks are counted in characters and sealed as UTF-8.
    const rows = Array.from({ length: 5_000 }, (_, index) => [String(index), `ü${'x'.repeat(40)}✓`]);
    for (const row of rows) held.add(row);
    const chunks = held.chunks();
    expect(chunks.length).toBeGreaterThan(2);
    for (const chunk of chunks) expect(chunk.at(-1)).toBe(0x0a);
    for (const chunk of chunks.slice(0, -1)) expect(chunk.length).toBeGreaterThanOrEqual(copyChunkBytes);
    expect(readBack(chunks)).toEqual(rows);
    expect(held.chunks()).toBe(chunks);
    expect(readBack(held.chunks())).toEqual(rows);
  });

  it('holds nothing until a row is added', () => {
    const held = new CopyTextRows(table);
    expect(held.chunks()).toEqual([]);
  });
});

import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { copyTextRowBatches, escapeCopyText, parseCopyTextLine } from './copy-text.ts';

const source = { schema: 'public', table: 't' };
const twoColumns = { source, columns: ['id', 'value'] };
const oneColumn = { source, columns: ['value'] };

describe('COPY text', () => {
  it('round-trips values through escape and parse', () => {
    const values = ['plain', 'tab\there', 'new\nline', 'back\\slash', 'cr\rx', '', 'ünïcødé ✓'];
    expect(parseCopyTextLine(values.map(escapeCopyText).join('\t'))).toEqual(values);
  });

  it('reads \\N as null and decodes octal, hex and letter escapes', () => {
    expect(parseCopyTextLine('\\N\t\\101\\x42\t\\b\\f\\v')).toEqual([null, 'AB', '\b\f\v']);
  });

  it('splits a stream into rows across chunk boundaries and multi-byte characters', async () => {
    const text = Buffer.from('1\tä\n2\t\\N\n3\tend');
    const chunks = [text.subarray(0, 3), text.subarray(3, 4), text.subarray(4)];
    const rows: (string | null)[][] = [];
    for await (const batch of copyTextRowBatches(Readable.from(chunks), twoColumns)) rows.push(...batch);
    expect(rows).toEqual([
      ['1', 'ä'],
      ['2', null],
      ['3', 'end'],
    ]);
  });

  it('keeps rows of one empty field, and a last line without its newline', async () => {
    const chunks = [Buffer.from('a\n\n'), Buffer.from('\nb'), Buffer.from('c\nlast')];
    const batches: (string | null)[][][] = [];
    for await (const batch of copyTextRowBatches(Readable.from(chunks), oneColumn)) batches.push(batch);
    expect(batches.flat()).toEqual([['a'], [''], [''], ['bc'], ['last']]);
    // One batch per chunk that ends a line, not one per row.
    expect(batches.length).toBeLessThanOrEqual(chunks.length + 1);
  });

  it('refuses a row with another number of fields than the table has columns', async () => {
    const read = async () => {
      for await (const _ of copyTextRowBatches(Readable.from([Buffer.from('1\ta\n2\n')]), twoColumns));
    };
    await expect(read()).rejects.toMatchObject({
      kind: 'decode',
      message: 'a COPY row of public.t has 1 fields, not 2',
    });
  });
});

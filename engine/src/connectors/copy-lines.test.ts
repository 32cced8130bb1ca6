import { describe, expect, it } from 'vitest';
import { textTable } from '../../../test/support/text-table.ts';
import { rowLine } from './copy-lines.ts';
import { parseCopyTextLine } from './copy-text.ts';

const table = textTable(['id', 'note', 'big']);
describe('rowLine', () => {
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

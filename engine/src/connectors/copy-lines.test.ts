import { describe, expect, it } from 'vitest';
import { rowLine } from './copy-lines.ts';
import { parseCopyTextLine } from './copy-text.ts';
import type { DestinationTable } from './records.ts';

const column = (name: string) => ({ name, typeOid: 25, typeModifier: -1, typeName: 'text', notNull: false });
const table: DestinationTable = {
  source: { schema: 'public', table: 't' },
  destination: { schema: 'public', table: 't' },
  columns: [column('id'), column('note'), column('big')],
  keyColumns: ['id'],
};
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

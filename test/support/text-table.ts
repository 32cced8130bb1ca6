// The destination table the unit tests of rows and lines use: `public.t` of
// text columns, keyed on its first column `id`.
import type { DestinationTable } from '../../engine/src/connectors/records.ts';

/** `public.t` with text columns named `columnNames`, the first of them `id`, its key. */
export function textTable(columnNames: readonly string[]): DestinationTable {
  return {
    source: { schema: 'public', table: 't' },
    destination: { schema: 'public', table: 't' },
    columns: columnNames.map((name) => ({
      name,
      typeOid: 25,
      typeModifier: -1,
      typeName: 'text',
      notNull: false,
    })),
    keyColumns: ['id'],
  };
}

// The destination table the unit tests of rows and lines use: `public.t` of
// text columns, keyed on its first column `id`; and a column of any type.
import type { DestinationTable, SourceColumn } from '../../engine/src/connectors/records.ts';

/**
 * A nullable column of the type `typeOid`: what the unit tests that render
 * values by type need (its type name is only the OID's digits).
 */
export function typedColumn(name: string, typeOid: number, typeModifier = -1): SourceColumn {
  return { name, typeOid, typeModifier, typeName: String(typeOid), notNull: false };
}

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

// The smallest destination table a connector test needs: `public.<name>` on
// both sides, a bigint key `id` and a text column `v`.
import type { DestinationTable } from '../../engine/src/connectors/records.ts';

export function idTextTable(name: string): DestinationTable {
  return {
    source: { schema: 'public', table: name },
    destination: { schema: 'public', table: name },
    columns: [
      { name: 'id', typeOid: 20, typeModifier: -1, typeName: 'bigint', notNull: true },
      { name: 'v', typeOid: 25, typeModifier: -1, typeName: 'text', notNull: false },
    ],
    keyColumns: ['id'],
  };
}

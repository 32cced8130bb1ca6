// The value-model type of a source column as a destination sees it: from the
// column's OID and modifier for built-in types, and by name for domains,
// hstore and citext, since a destination has no access to the source catalog.
// Shared by the destinations that write typed values (ClickHouse, Snowflake).
import { numericColumnType, pgColumnType } from './pg-type-map.ts';
import type { ColumnType, ScalarColumnType } from './value-kind.ts';

/** What a destination knows of a source column's type (connectors/records.ts SourceColumn has these fields). */
export interface SourceColumnTypeInfo {
  readonly typeOid: number;
  readonly typeModifier: number;
  /** `format_type(oid, typmod)`. */
  readonly typeName: string;
  /** For a domain, the type it is over. */
  readonly domainBaseTypeName?: string | undefined;
}

/**
 * Built-in types by the name format_type gives them, for domains over them
 * (SourceColumn.domainBaseTypeName): the destination has no catalog access, so
 * the base type is recognised by name. Modifiers that change nothing here
 * (varchar length, timestamp precision) are stripped before the lookup.
 */
const scalarTypesByName: ReadonlyMap<string, ScalarColumnType> = new Map<string, ScalarColumnType>([
  ['smallint', { kind: 'int16' }],
  ['integer', { kind: 'int32' }],
  ['bigint', { kind: 'int64' }],
  ['oid', { kind: 'int64' }],
  ['real', { kind: 'float32' }],
  ['double precision', { kind: 'float64' }],
  ['boolean', { kind: 'boolean' }],
  ['text', { kind: 'string' }],
  ['character varying', { kind: 'string' }],
  ['character', { kind: 'string' }],
  ['name', { kind: 'string' }],
  ['"char"', { kind: 'string' }],
  ['citext', { kind: 'string' }],
  ['bytea', { kind: 'bytes' }],
  ['uuid', { kind: 'uuid' }],
  ['json', { kind: 'json' }],
  ['jsonb', { kind: 'json' }],
  ['date', { kind: 'date' }],
  ['time without time zone', { kind: 'time' }],
  ['time with time zone', { kind: 'timetz' }],
  ['timestamp without time zone', { kind: 'timestamp' }],
  ['timestamp with time zone', { kind: 'timestamptz' }],
  ['interval', { kind: 'interval' }],
  ['inet', { kind: 'inet' }],
  ['cidr', { kind: 'cidr' }],
  ['macaddr', { kind: 'macaddr' }],
  ['macaddr8', { kind: 'macaddr' }],
  ['money', { kind: 'money' }],
  ['bit', { kind: 'bit' }],
  ['bit varying', { kind: 'bit' }],
  ['xml', { kind: 'xml' }],
  ['hstore', { kind: 'hstore' }],
]);

function scalarTypeByName(name: string): ScalarColumnType {
  const numeric = /^numeric\((\d+),(-?\d+)\)$/.exec(name);
  if (numeric) return { kind: 'numeric', precision: Number(numeric[1]), scale: Number(numeric[2]) };
  if (name === 'numeric') return numericColumnType(-1);
  // Strip a schema qualifier, then length or precision modifiers: varchar(20), time(3) with time zone.
  const bare = name.replace(/^(?:"[^"]+"|[a-z_][a-z0-9_$]*)\.(?=.)/, '').replace(/\(\d+\)/, '');
  return scalarTypesByName.get(bare) ?? { kind: 'unknown_text', name };
}

function typeByName(name: string): ColumnType {
  if (!name.endsWith('[]')) return scalarTypeByName(name);
  const element = scalarTypeByName(name.replace(/(\[\])+$/, ''));
  // box[] separates elements with ';', hstore[] would need Array(Map): both stay text.
  if ((element.kind === 'geometry' && element.name === 'box') || element.kind === 'hstore') {
    return { kind: 'unknown_text', name };
  }
  return { kind: 'array', element };
}

/**
 * The value-model type of a source column. Built-in types come from their OID
 * and modifier; domains from their base type's name; hstore and citext from
 * their name; enums and other user types are kept as text.
 */
export function sourceColumnType(column: SourceColumnTypeInfo): ColumnType {
  const builtin = pgColumnType(column.typeOid, column.typeModifier);
  if (builtin.kind !== 'unknown_text' || builtin.name !== undefined) return builtin;
  return typeByName(column.domainBaseTypeName ?? column.typeName);
}

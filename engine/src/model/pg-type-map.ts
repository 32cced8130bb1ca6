// Maps a PostgreSQL column type to the engine's ColumnType from what the
// source can tell: the type OID and type modifier (pg_attribute.atttypid and
// atttypmod, or the pgoutput Relation message's column fields), plus, for any
// type that is not built in, the row pgTypeCatalogQuery returns for it.
//
// Built-in OIDs are fixed across PostgreSQL versions (src/include/catalog/pg_type.dat);
// enums, domains, extension types (hstore, PostGIS) and arrays of them get
// their OIDs at creation time and can only be recognised from pg_type.
// https://www.postgresql.org/docs/current/catalog-pg-type.html

import { EngineError } from '../errors.ts';
import type { ColumnType, NumericColumnType, ScalarColumnType } from './value-kind.ts';

/** pg_type.typtype: base, composite, domain, enum, pseudo, range, multirange. */
export const pgTyptypes = ['b', 'c', 'd', 'e', 'p', 'r', 'm'] as const;

export type PgTyptype = (typeof pgTyptypes)[number];

/** What pg_type says about one type; the fields pgTypeCatalogQuery selects. */
export interface PgTypeInfo {
  readonly oid: number;
  readonly typname: string;
  readonly typtype: PgTyptype;
  /** pg_type.typcategory: 'A' array, 'S' string, 'E' enum, 'U' user-defined, … */
  readonly typcategory: string;
  /** pg_type.typelem: the element type of an array, 0 otherwise. */
  readonly elemTypeOid: number;
  /** pg_type.typbasetype: the type a domain is over, 0 unless typtype is 'd'. */
  readonly baseTypeOid: number;
  /** pg_type.typtypmod: a domain's modifier on its base type (numeric(10,2)), -1 if none. */
  readonly baseTypeModifier: number;
}

/** Catalog facts by type OID, as built by pgTypeLookupFromRows. */
export type PgTypeLookup = ReadonlyMap<number, PgTypeInfo>;

/**
 * Fetches PgTypeInfo rows for the OIDs in $1 (an oid[]) and, transitively, for
 * the element types of arrays and the base types of domains among them, so
 * that one round trip resolves a domain over an enum array, an array of a
 * domain, and so on. OIDs pg_type does not know are simply absent.
 */
export const pgTypeCatalogQuery = `
WITH RECURSIVE wanted(oid) AS (
  SELECT requested.oid FROM unnest($1::pg_catalog.oid[]) AS requested(oid)
  UNION
  SELECT related.oid
  FROM wanted
  JOIN pg_catalog.pg_type t ON t.oid = wanted.oid
  CROSS JOIN LATERAL (VALUES (t.typbasetype), (t.typelem)) AS related(oid)
  WHERE related.oid <> 0
)
SELECT
  t.oid,
  t.typname::text AS typname,
  t.typtype::text AS typtype,
  t.typcategory::text AS typcategory,
  t.typelem AS elem_type_oid,
  t.typbasetype AS base_type_oid,
  t.typtypmod AS base_type_modifier
FROM pg_catalog.pg_type t
WHERE t.oid IN (SELECT wanted.oid FROM wanted)
`.trim();

/** One row of pgTypeCatalogQuery. OIDs may arrive as numbers or strings, depending on the driver. */
export interface PgTypeCatalogRow {
  readonly oid: number | string | bigint;
  readonly typname: string;
  readonly typtype: string;
  readonly typcategory: string;
  readonly elem_type_oid: number | string | bigint;
  readonly base_type_oid: number | string | bigint;
  readonly base_type_modifier: number | string | bigint;
}

const maxOid = 0xffff_ffff;

function catalogRowError(field: string): EngineError {
  return new EngineError('internal', `pg_type catalog row has an invalid ${field}`);
}

function toOid(value: number | string | bigint, field: string): number {
  const oid = typeof value === 'number' ? value : Number(value);
  if (!Number.isInteger(oid) || oid < 0 || oid > maxOid) throw catalogRowError(field);
  return oid;
}

function toInt32(value: number | string | bigint, field: string): number {
  const int = typeof value === 'number' ? value : Number(value);
  if (!Number.isInteger(int) || int < -0x8000_0000 || int > 0x7fff_ffff) throw catalogRowError(field);
  return int;
}

function isTyptype(value: string): value is PgTyptype {
  return (pgTyptypes as readonly string[]).includes(value);
}

/** Turns pgTypeCatalogQuery rows into a lookup by OID. */
export function pgTypeLookupFromRows(rows: readonly PgTypeCatalogRow[]): PgTypeLookup {
  const lookup = new Map<number, PgTypeInfo>();
  for (const row of rows) {
    if (!isTyptype(row.typtype)) throw catalogRowError('typtype');
    if (typeof row.typname !== 'string' || row.typname === '') throw catalogRowError('typname');
    if (typeof row.typcategory !== 'string' || row.typcategory.length !== 1) {
      throw catalogRowError('typcategory');
    }
    const info: PgTypeInfo = {
      oid: toOid(row.oid, 'oid'),
      typname: row.typname,
      typtype: row.typtype,
      typcategory: row.typcategory,
      elemTypeOid: toOid(row.elem_type_oid, 'elem_type_oid'),
      baseTypeOid: toOid(row.base_type_oid, 'base_type_oid'),
      baseTypeModifier: toInt32(row.base_type_modifier, 'base_type_modifier'),
    };
    lookup.set(info.oid, info);
  }
  return lookup;
}

/** Built-in scalar types by OID (src/include/catalog/pg_type.dat). */
const builtinScalarTypes: ReadonlyMap<number, ScalarColumnType> = new Map<number, ScalarColumnType>([
  [21, { kind: 'int16' }], // int2
  [23, { kind: 'int32' }], // int4
  [20, { kind: 'int64' }], // int8
  [26, { kind: 'int64' }], // oid: unsigned 32-bit, beyond int32
  [700, { kind: 'float32' }], // float4
  [701, { kind: 'float64' }], // float8
  [1700, { kind: 'numeric' }], // numeric; the modifier is applied below
  [16, { kind: 'boolean' }], // bool
  [25, { kind: 'string' }], // text
  [1043, { kind: 'string' }], // varchar
  [1042, { kind: 'string' }], // bpchar: the text output keeps the blank padding
  [19, { kind: 'string' }], // name
  [18, { kind: 'string' }], // "char"
  [17, { kind: 'bytes' }], // bytea
  [2950, { kind: 'uuid' }], // uuid
  [114, { kind: 'json' }], // json
  [3802, { kind: 'json' }], // jsonb
  [1082, { kind: 'date' }], // date
  [1083, { kind: 'time' }], // time
  [1266, { kind: 'timetz' }], // timetz
  [1114, { kind: 'timestamp' }], // timestamp
  [1184, { kind: 'timestamptz' }], // timestamptz
  [1186, { kind: 'interval' }], // interval
  [869, { kind: 'inet' }], // inet
  [650, { kind: 'cidr' }], // cidr
  [829, { kind: 'macaddr' }], // macaddr
  [774, { kind: 'macaddr' }], // macaddr8
  [790, { kind: 'money' }], // money
  [1560, { kind: 'bit' }], // bit
  [1562, { kind: 'bit' }], // varbit
  [142, { kind: 'xml' }], // xml
  [600, { kind: 'geometry', name: 'point' }],
  [628, { kind: 'geometry', name: 'line' }],
  [601, { kind: 'geometry', name: 'lseg' }],
  [603, { kind: 'geometry', name: 'box' }],
  [602, { kind: 'geometry', name: 'path' }],
  [604, { kind: 'geometry', name: 'polygon' }],
  [718, { kind: 'geometry', name: 'circle' }],
  // typcategory 'A' with a typelem, but their text output is space-separated,
  // not an array literal: they must never be taken for arrays.
  [22, { kind: 'unknown_text', name: 'int2vector' }],
  [30, { kind: 'unknown_text', name: 'oidvector' }],
  // box's array delimiter is ';', not ',': box[] is kept as text.
  [1020, { kind: 'unknown_text', name: '_box' }],
]);

/** Built-in array types by OID, each to its element type's OID. */
const builtinArrayElements: ReadonlyMap<number, number> = new Map([
  [1005, 21], // _int2
  [1007, 23], // _int4
  [1016, 20], // _int8
  [1028, 26], // _oid
  [1021, 700], // _float4
  [1022, 701], // _float8
  [1231, 1700], // _numeric
  [1000, 16], // _bool
  [1009, 25], // _text
  [1015, 1043], // _varchar
  [1014, 1042], // _bpchar
  [1003, 19], // _name
  [1002, 18], // _char
  [1001, 17], // _bytea
  [2951, 2950], // _uuid
  [199, 114], // _json
  [3807, 3802], // _jsonb
  [1182, 1082], // _date
  [1183, 1083], // _time
  [1270, 1266], // _timetz
  [1115, 1114], // _timestamp
  [1185, 1184], // _timestamptz
  [1187, 1186], // _interval
  [1041, 869], // _inet
  [651, 650], // _cidr
  [1040, 829], // _macaddr
  [775, 774], // _macaddr8
  [791, 790], // _money
  [1561, 1560], // _bit
  [1563, 1562], // _varbit
  [143, 142], // _xml
  [1017, 600], // _point
  [629, 628], // _line
  [1018, 601], // _lseg
  [1019, 602], // _path
  [1027, 604], // _polygon
  [719, 718], // _circle
]);

/** Types whose OID alone does not say what they are: enums, domains, extension types, … */
export function needsCatalogInfo(typeOid: number): boolean {
  return !builtinScalarTypes.has(typeOid) && !builtinArrayElements.has(typeOid);
}

/** Extension base types recognised by name: they have no fixed OID. */
const extensionTypesByName: ReadonlyMap<string, ScalarColumnType> = new Map<string, ScalarColumnType>([
  ['hstore', { kind: 'hstore' }],
  ['citext', { kind: 'string' }],
  ['geometry', { kind: 'geometry', name: 'geometry' }],
  ['geography', { kind: 'geometry', name: 'geography' }],
  ['box2d', { kind: 'geometry', name: 'box2d' }],
  ['box3d', { kind: 'geometry', name: 'box3d' }],
]);

const varHeaderSize = 4;

/**
 * Decodes a numeric type modifier. PostgreSQL 15 packs it as
 * ((precision << 16) | (scale & 0x7ff)) + VARHDRSZ, the scale being an
 * 11-bit two's-complement number since negative scales became legal
 * (src/backend/utils/adt/numeric.c, make_numeric_typmod); -1 means unconstrained.
 */
export function numericColumnType(typeModifier: number): NumericColumnType {
  if (typeModifier < varHeaderSize) return { kind: 'numeric' };
  const packed = typeModifier - varHeaderSize;
  return {
    kind: 'numeric',
    precision: (packed >> 16) & 0xffff,
    scale: ((packed & 0x7ff) ^ 1024) - 1024,
  };
}

// Domains over domains nest; a cycle cannot exist in pg_type, but a bound keeps
// a corrupt lookup from recursing forever.
const maxDomainDepth = 32;

/**
 * The ColumnType of a column of type `typeOid` with modifier `typeModifier`
 * (-1 when none). Built-in types need no `catalog`; for the others it must
 * hold the pgTypeCatalogQuery rows for the type (the query follows domains
 * and array elements itself). A type neither built in nor in the catalog
 * becomes unknown_text, kept as its text output.
 */
export function pgColumnType(typeOid: number, typeModifier: number, catalog?: PgTypeLookup): ColumnType {
  return resolveType(typeOid, typeModifier, catalog, 0);
}

function builtinScalarType(typeOid: number, typeModifier: number): ScalarColumnType | undefined {
  if (typeOid === 1700) return numericColumnType(typeModifier);
  return builtinScalarTypes.get(typeOid);
}

function resolveType(
  typeOid: number,
  typeModifier: number,
  catalog: PgTypeLookup | undefined,
  depth: number,
): ColumnType {
  const builtin = builtinScalarType(typeOid, typeModifier);
  if (builtin !== undefined) return builtin;
  const builtinElementOid = builtinArrayElements.get(typeOid);
  // An array column's modifier is its element's: numeric(10,2)[] has the typmod of numeric(10,2).
  const builtinElement =
    builtinElementOid === undefined ? undefined : builtinScalarType(builtinElementOid, typeModifier);
  if (builtinElement !== undefined) return { kind: 'array', element: builtinElement };

  const info = catalog?.get(typeOid);
  if (info === undefined || depth > maxDomainDepth) return { kind: 'unknown_text' };
  switch (info.typtype) {
    case 'd':
      // A domain column's own modifier is -1; the constraint lives on the domain.
      return resolveType(
        info.baseTypeOid,
        info.baseTypeModifier >= 0 ? info.baseTypeModifier : typeModifier,
        catalog,
        depth + 1,
      );
    case 'e':
      return { kind: 'enum', name: info.typname };
    case 'b': {
      if (info.typcategory === 'A' && info.elemTypeOid !== 0) {
        const element = resolveType(info.elemTypeOid, typeModifier, catalog, depth + 1);
        // box (and a domain over it) puts ';' between array elements: such arrays stay text.
        if (element.kind === 'array' || (element.kind === 'geometry' && element.name === 'box')) {
          return { kind: 'unknown_text', name: info.typname };
        }
        return { kind: 'array', element };
      }
      const extension = extensionTypesByName.get(info.typname);
      if (extension !== undefined) return extension;
      if (info.typcategory === 'S') return { kind: 'string' };
      return { kind: 'unknown_text', name: info.typname };
    }
    default:
      // Composite, range, multirange and pseudo types: kept as their text output.
      return { kind: 'unknown_text', name: info.typname };
  }
}

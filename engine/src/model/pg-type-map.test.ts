import { describe, expect, it } from 'vitest';
import { EngineError } from '../errors.ts';
import {
  needsCatalogInfo,
  numericColumnType,
  type PgTypeCatalogRow,
  pgColumnType,
  pgTypeCatalogQuery,
  pgTypeLookupFromRows,
} from './pg-type-map.ts';
import type { ColumnType } from './value-kind.ts';

/** The modifier PostgreSQL 15 stores for numeric(precision, scale). */
function numericTypmod(precision: number, scale: number): number {
  return ((precision << 16) | (scale & 0x7ff)) + 4;
}

describe('built-in types', () => {
  const scalars: ReadonlyArray<readonly [number, ColumnType]> = [
    [21, { kind: 'int16' }],
    [23, { kind: 'int32' }],
    [20, { kind: 'int64' }],
    [26, { kind: 'int64' }],
    [700, { kind: 'float32' }],
    [701, { kind: 'float64' }],
    [1700, { kind: 'numeric' }],
    [16, { kind: 'boolean' }],
    [25, { kind: 'string' }],
    [1043, { kind: 'string' }],
    [1042, { kind: 'string' }],
    [19, { kind: 'string' }],
    [18, { kind: 'string' }],
    [17, { kind: 'bytes' }],
    [2950, { kind: 'uuid' }],
    [114, { kind: 'json' }],
    [3802, { kind: 'json' }],
    [1082, { kind: 'date' }],
    [1083, { kind: 'time' }],
    [1266, { kind: 'timetz' }],
    [1114, { kind: 'timestamp' }],
    [1184, { kind: 'timestamptz' }],
    [1186, { kind: 'interval' }],
    [869, { kind: 'inet' }],
    [650, { kind: 'cidr' }],
    [829, { kind: 'macaddr' }],
    [774, { kind: 'macaddr' }],
    [790, { kind: 'money' }],
    [1560, { kind: 'bit' }],
    [1562, { kind: 'bit' }],
    [142, { kind: 'xml' }],
    [600, { kind: 'geometry', name: 'point' }],
    [628, { kind: 'geometry', name: 'line' }],
    [601, { kind: 'geometry', name: 'lseg' }],
    [603, { kind: 'geometry', name: 'box' }],
    [602, { kind: 'geometry', name: 'path' }],
    [604, { kind: 'geometry', name: 'polygon' }],
    [718, { kind: 'geometry', name: 'circle' }],
  ];

  it.each(scalars)('maps OID %i without catalog info', (oid, expected) => {
    expect(pgColumnType(oid, -1)).toEqual(expected);
    expect(needsCatalogInfo(oid)).toBe(false);
  });

  const arrays: ReadonlyArray<readonly [number, number]> = [
    [1005, 21],
    [1007, 23],
    [1016, 20],
    [1028, 26],
    [1021, 700],
    [1022, 701],
    [1231, 1700],
    [1000, 16],
    [1009, 25],
    [1015, 1043],
    [1014, 1042],
    [1003, 19],
    [1002, 18],
    [1001, 17],
    [2951, 2950],
    [199, 114],
    [3807, 3802],
    [1182, 1082],
    [1183, 1083],
    [1270, 1266],
    [1115, 1114],
    [1185, 1184],
    [1187, 1186],
    [1041, 869],
    [651, 650],
    [1040, 829],
    [775, 774],
    [791, 790],
    [1561, 1560],
    [1563, 1562],
    [143, 142],
    [1017, 600],
    [629, 628],
    [1018, 601],
    [1019, 602],
    [1027, 604],
    [719, 718],
  ];

  it.each(arrays)('maps array OID %i to an array of OID %i', (arrayOid, elementOid) => {
    expect(pgColumnType(arrayOid, -1)).toEqual({ kind: 'array', element: pgColumnType(elementOid, -1) });
    expect(needsCatalogInfo(arrayOid)).toBe(false);
  });

  it('keeps box[] as text: its elements are separated by semicolons', () => {
    expect(pgColumnType(1020, -1)).toEqual({ kind: 'unknown_text', name: '_box' });
  });

  it('never takes int2vector or oidvector for arrays', () => {
    expect(pgColumnType(22, -1)).toEqual({ kind: 'unknown_text', name: 'int2vector' });
    expect(pgColumnType(30, -1)).toEqual({ kind: 'unknown_text', name: 'oidvector' });
  });

  it('maps an unknown OID without catalog info to unknown_text', () => {
    expect(pgColumnType(3614, -1)).toEqual({ kind: 'unknown_text' }); // tsvector
    expect(needsCatalogInfo(3614)).toBe(true);
    expect(needsCatalogInfo(16_384)).toBe(true);
  });
});

describe('numeric type modifiers', () => {
  it('reads precision and scale', () => {
    expect(numericColumnType(numericTypmod(10, 2))).toEqual({ kind: 'numeric', precision: 10, scale: 2 });
    expect(numericColumnType(655_366)).toEqual({ kind: 'numeric', precision: 10, scale: 2 });
    expect(numericColumnType(numericTypmod(38, 0))).toEqual({ kind: 'numeric', precision: 38, scale: 0 });
    expect(numericColumnType(numericTypmod(1000, 1000))).toEqual({
      kind: 'numeric',
      precision: 1000,
      scale: 1000,
    });
  });

  it('reads the negative scales and scales above precision PostgreSQL 15 allows', () => {
    expect(numericColumnType(329_730)).toEqual({ kind: 'numeric', precision: 5, scale: -2 });
    expect(numericColumnType(numericTypmod(1, -1000))).toEqual({
      kind: 'numeric',
      precision: 1,
      scale: -1000,
    });
    expect(numericColumnType(numericTypmod(3, 5))).toEqual({ kind: 'numeric', precision: 3, scale: 5 });
  });

  it('treats -1 as unconstrained', () => {
    expect(numericColumnType(-1)).toEqual({ kind: 'numeric' });
    expect(pgColumnType(1700, -1)).toEqual({ kind: 'numeric' });
  });

  it('applies an array column modifier to the element', () => {
    expect(pgColumnType(1231, numericTypmod(12, 4))).toEqual({
      kind: 'array',
      element: { kind: 'numeric', precision: 12, scale: 4 },
    });
  });
});

function row(
  oid: number,
  typname: string,
  typtype: string,
  typcategory: string,
  elem = 0,
  base = 0,
  baseModifier = -1,
): PgTypeCatalogRow {
  return {
    oid,
    typname,
    typtype,
    typcategory,
    elem_type_oid: elem,
    base_type_oid: base,
    base_type_modifier: baseModifier,
  };
}

describe('catalog types', () => {
  const catalog = pgTypeLookupFromRows([
    row(16_400, 'mood', 'e', 'E'),
    row(16_401, '_mood', 'b', 'A', 16_400),
    row(16_402, 'positive_int', 'd', 'N', 0, 23),
    row(16_403, '_positive_int', 'b', 'A', 16_402),
    row(16_404, 'money_amount', 'd', 'N', 0, 1700, numericTypmod(10, 2)),
    row(16_405, 'hstore', 'b', 'U'),
    row(16_406, '_hstore', 'b', 'A', 16_405),
    row(16_407, 'geometry', 'b', 'U'),
    row(16_408, '_geometry', 'b', 'A', 16_407),
    row(16_409, 'geography', 'b', 'U'),
    row(16_410, 'citext', 'b', 'S'),
    row(16_411, 'address', 'c', 'C'),
    row(16_412, 'floatrange', 'r', 'R'),
    row(16_413, 'nested_domain', 'd', 'N', 0, 16_402),
    row(16_414, 'mood_list', 'd', 'A', 0, 16_401),
    row(16_415, 'corners', 'd', 'G', 0, 603),
    row(16_416, '_corners', 'b', 'A', 16_415),
    row(16_417, 'ltree', 'b', 'U'),
    row(16_418, 'text_domain', 'd', 'S', 0, 25),
    row(16_419, '_money_amount', 'b', 'A', 16_404),
    row(16_420, '_address', 'b', 'A', 16_411),
    row(16_421, 'dangling_domain', 'd', 'N', 0, 99_999),
  ]);

  const cases: ReadonlyArray<readonly [string, number, ColumnType]> = [
    ['an enum', 16_400, { kind: 'enum', name: 'mood' }],
    ['an enum array', 16_401, { kind: 'array', element: { kind: 'enum', name: 'mood' } }],
    ['a domain over int4', 16_402, { kind: 'int32' }],
    ['an array of a domain', 16_403, { kind: 'array', element: { kind: 'int32' } }],
    ['a domain over numeric(10,2)', 16_404, { kind: 'numeric', precision: 10, scale: 2 }],
    ['hstore', 16_405, { kind: 'hstore' }],
    ['hstore[]', 16_406, { kind: 'array', element: { kind: 'hstore' } }],
    ['PostGIS geometry', 16_407, { kind: 'geometry', name: 'geometry' }],
    ['PostGIS geometry[]', 16_408, { kind: 'array', element: { kind: 'geometry', name: 'geometry' } }],
    ['PostGIS geography', 16_409, { kind: 'geometry', name: 'geography' }],
    ['citext', 16_410, { kind: 'string' }],
    ['a composite type', 16_411, { kind: 'unknown_text', name: 'address' }],
    ['a range type', 16_412, { kind: 'unknown_text', name: 'floatrange' }],
    ['a domain over a domain', 16_413, { kind: 'int32' }],
    ['a domain over an enum array', 16_414, { kind: 'array', element: { kind: 'enum', name: 'mood' } }],
    ['a domain over box', 16_415, { kind: 'geometry', name: 'box' }],
    ['an array of a domain over box', 16_416, { kind: 'unknown_text', name: '_corners' }],
    ['an unrecognised base type', 16_417, { kind: 'unknown_text', name: 'ltree' }],
    ['a domain over text', 16_418, { kind: 'string' }],
    [
      'an array of a domain over numeric(10,2)',
      16_419,
      { kind: 'array', element: { kind: 'numeric', precision: 10, scale: 2 } },
    ],
    [
      'an array of a composite',
      16_420,
      { kind: 'array', element: { kind: 'unknown_text', name: 'address' } },
    ],
    ['a domain whose base is missing', 16_421, { kind: 'unknown_text' }],
    ['an OID the catalog lacks', 77_777, { kind: 'unknown_text' }],
  ];

  it.each(cases)('maps %s', (_name, oid, expected) => {
    expect(pgColumnType(oid, -1, catalog)).toEqual(expected);
  });

  it('prefers built-in knowledge over the catalog', () => {
    const misleading = pgTypeLookupFromRows([row(23, 'int4', 'e', 'E')]);
    expect(pgColumnType(23, -1, misleading)).toEqual({ kind: 'int32' });
  });

  it('stops on a domain cycle in a corrupt catalog', () => {
    const cyclic = pgTypeLookupFromRows([row(1, 'a', 'd', 'N', 0, 2), row(2, 'b', 'd', 'N', 0, 1)]);
    expect(pgColumnType(1, -1, cyclic)).toEqual({ kind: 'unknown_text' });
  });
});

describe('pgTypeLookupFromRows', () => {
  it('accepts OIDs as strings and bigints, as drivers return them', () => {
    const lookup = pgTypeLookupFromRows([
      {
        oid: '4294967295',
        typname: 'x',
        typtype: 'd',
        typcategory: 'N',
        elem_type_oid: 0n,
        base_type_oid: '23',
        base_type_modifier: '-1',
      },
    ]);
    expect(lookup.get(4_294_967_295)).toEqual({
      oid: 4_294_967_295,
      typname: 'x',
      typtype: 'd',
      typcategory: 'N',
      elemTypeOid: 0,
      baseTypeOid: 23,
      baseTypeModifier: -1,
    });
  });

  it.each([
    ['typtype', { typtype: 'z' }],
    ['typname', { typname: '' }],
    ['typcategory', { typcategory: 'AB' }],
    ['oid', { oid: -1 }],
    ['oid', { oid: '4294967296' }],
    ['elem_type_oid', { elem_type_oid: 'x' }],
    ['base_type_modifier', { base_type_modifier: 1.5 }],
  ])('rejects a row with an invalid %s', (field, change) => {
    const bad = { ...row(1, 'a', 'b', 'U'), ...change };
    expect(() => pgTypeLookupFromRows([bad])).toThrow(EngineError);
    expect(() => pgTypeLookupFromRows([bad])).toThrow(field);
  });

  it('is a query with one oid[] parameter', () => {
    expect(pgTypeCatalogQuery).toContain('$1::pg_catalog.oid[]');
    expect(pgTypeCatalogQuery).not.toContain('$2');
  });
});

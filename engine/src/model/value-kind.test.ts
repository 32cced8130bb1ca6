import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  type ColumnType,
  describeColumnType,
  isArrayColumnType,
  isScalarKind,
  type NumericColumnType,
  type ScalarColumnType,
  scalarKinds,
  valueKinds,
} from './value-kind.ts';

describe('value kinds', () => {
  it('lists every scalar kind once, and array apart from them', () => {
    expect(new Set(scalarKinds).size).toBe(scalarKinds.length);
    expect(valueKinds).toEqual([...scalarKinds, 'array']);
    expect(isScalarKind('int64')).toBe(true);
    expect(isScalarKind('array')).toBe(false);
    expect(isScalarKind('int128')).toBe(false);
  });

  it('describes column types without values', () => {
    const cases: ReadonlyArray<readonly [ColumnType, string]> = [
      [{ kind: 'int32' }, 'int32'],
      [{ kind: 'numeric' }, 'numeric'],
      [{ kind: 'numeric', precision: 10, scale: -2 }, 'numeric(10,-2)'],
      [{ kind: 'enum', name: 'mood' }, 'enum(mood)'],
      [{ kind: 'geometry', name: 'point' }, 'geometry(point)'],
      [{ kind: 'unknown_text' }, 'unknown_text'],
      [{ kind: 'unknown_text', name: 'tsvector' }, 'unknown_text(tsvector)'],
      [{ kind: 'array', element: { kind: 'numeric', precision: 5, scale: 1 } }, 'array<numeric(5,1)>'],
    ];
    for (const [type, description] of cases) expect(describeColumnType(type)).toBe(description);
  });

  it('tells arrays from scalars', () => {
    expect(isArrayColumnType({ kind: 'array', element: { kind: 'uuid' } })).toBe(true);
    expect(isArrayColumnType({ kind: 'uuid' })).toBe(false);
  });

  it('makes wrong states unrepresentable', () => {
    // An array of arrays, a scale without a precision, an enum without a name: none type-check.
    expectTypeOf<{
      kind: 'array';
      element: { kind: 'array'; element: { kind: 'int32' } };
    }>().not.toExtend<ColumnType>();
    expectTypeOf<{ kind: 'numeric'; scale: 2 }>().not.toExtend<NumericColumnType>();
    expectTypeOf<{ kind: 'enum' }>().not.toExtend<ScalarColumnType>();
    // @ts-expect-error an int32 has no precision
    const int32WithPrecision: ColumnType = { kind: 'int32', precision: 3 };
    expect(int32WithPrecision.kind).toBe('int32');
    expectTypeOf<{ kind: 'numeric'; precision: 10; scale: 2 }>().toExtend<ColumnType>();

    const numeric = { kind: 'numeric', precision: 10, scale: 2 } as NumericColumnType;
    if (numeric.precision !== undefined) expectTypeOf(numeric.scale).toEqualTypeOf<number>();
  });
});

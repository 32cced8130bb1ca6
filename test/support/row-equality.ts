// Rows (engine/src/connectors/records.ts, Row) compare by their cells in every
// test: a row is a view whose cells live in private fields or in bytes, so
// the structural equality of toEqual would see two rows of different cells
// as equal. A row equals another row, or an array, of the same cells. A setup
// file of every vitest project (vitest.config.ts).
import { expect } from 'vitest';
import type { Row } from '../../engine/src/connectors/records.ts';

function isRow(value: unknown): value is Row {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Row).cells === 'function' &&
    typeof (value as Row).tupleData === 'function'
  );
}

type Tester = Parameters<typeof expect.addEqualityTesters>[0][number];

const rowsEqual: Tester = function rowsEqual(a, b, testers) {
  // Called for every pair toEqual compares, each byte of two buffers too: primitives leave at once.
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return undefined;
  const aIsRow = isRow(a);
  const bIsRow = isRow(b);
  if (!aIsRow && !bIsRow) return undefined;
  const cellsOf = (value: unknown) => (isRow(value) ? value.cells() : value);
  if (aIsRow !== bIsRow && !Array.isArray(aIsRow ? b : a)) return false;
  return this.equals(cellsOf(a), cellsOf(b), testers);
};

expect.addEqualityTesters([rowsEqual]);

import { describe, expect, it } from 'vitest';
import { rowVersion } from './row-version.ts';

describe('row versions', () => {
  it('put the batch id above 27 bits of change index', () => {
    expect(rowVersion(1n, 0)).toBe(134_217_728n);
    expect(rowVersion(2n, 5)).toBe(2n * 134_217_728n + 5n);
    // Any change of a later batch wins over every change of an earlier one.
    expect(rowVersion(3n, 0)).toBeGreaterThan(rowVersion(2n, 99_999_999));
    expect(() => rowVersion(1n, 2 ** 27)).toThrow(/2\^27/);
  });
});

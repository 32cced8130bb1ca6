import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { apiErrors } from './errors.ts';

describe('API errors', () => {
  it('are documented in docs/api.md with the same status and code', () => {
    const doc = readFileSync(join(import.meta.dirname, '..', '..', '..', 'docs', 'api.md'), 'utf8');
    const documented: Record<string, { status: number; code: number }> = {};
    for (const line of doc.split('\n')) {
      const cells = line.split('|').map((cell) => cell.trim());
      if (cells.length === 6 && /^[a-z][A-Za-z]+$/.test(cells[1] ?? '') && /^\d{3}$/.test(cells[2] ?? '')) {
        documented[cells[1] ?? ''] = { status: Number(cells[2]), code: Number(cells[3]) };
      }
    }
    expect(documented).toEqual(apiErrors);
  });
});

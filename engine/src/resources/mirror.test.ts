import { describe, expect, it } from 'vitest';
import { rowFilterEscape, rowFilterSchema } from './mirror.ts';

describe('row filters', () => {
  it('takes one expression, parentheses, literals and quoted names holding anything', () => {
    for (const filter of [
      `region = 'eu' AND amount >= 10`,
      `(a > 1) OR (b IN (1, 2))`,
      `note = 'it''s ; -- not a comment )'`,
      `"odd ) name;" = 1`,
      `note = E'a\\'b ) ;'`,
      `body = $$ ) ; -- $$`,
      `body = $tag$ ) $$ ; $tag$`,
    ]) {
      expect(rowFilterEscape(filter), filter).toBeUndefined();
    }
  });

  it('refuses what could end the expression or hide text', () => {
    for (const [filter, reason] of [
      ['id > 0); DROP TABLE t', 'a ) closes what it did not open'],
      ['id > 0) OR (true', 'a ) closes what it did not open'],
      ['id > 0; SELECT 1', 'it holds a ;'],
      ['id > 0 -- hidden', 'it holds a comment'],
      ['id > 0 /* hidden */', 'it holds a comment'],
      ['(id > 0', 'a ( is not closed'],
      [`note = 'open`, 'a quote is not closed'],
      [`note = $$open`, 'a dollar quote is not closed'],
      [`note = 'a\\' OR true`, "a string literal holds a backslash: write it as E'…'"],
    ] as const) {
      expect(rowFilterEscape(filter), filter).toBe(reason);
    }
  });

  it('is trimmed, and refused empty or too long', () => {
    expect(rowFilterSchema.parse('  id > 0 ')).toBe('id > 0');
    expect(rowFilterSchema.safeParse('  ').success).toBe(false);
    expect(rowFilterSchema.safeParse(`id > ${'1'.repeat(5000)}`).success).toBe(false);
  });
});

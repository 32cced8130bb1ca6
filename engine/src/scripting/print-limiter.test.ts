import { describe, expect, it } from 'vitest';
import { PrintLimiter } from './print-limiter.ts';

describe('print limiter', () => {
  it('keeps a burst per window, then says how many lines it dropped', () => {
    const limiter = new PrintLimiter({ burst: 2, windowMs: 1_000, maxLength: 5 });
    expect(limiter.admit('one', 0)).toBe('one');
    expect(limiter.admit('two', 10)).toBe('two');
    expect(limiter.admit('three', 20)).toBeUndefined();
    expect(limiter.admit('four', 30)).toBeUndefined();
    expect(limiter.admit('five', 1_000)).toBe('five (2 earlier print line(s) dropped)');
    expect(limiter.admit('much too long', 1_010)).toBe('much …');
    expect(limiter.admit('seven', 1_020)).toBeUndefined();
  });
});

import { describe, expect, it } from 'vitest';
import { configHash } from './config-hash.ts';

describe('configHash', () => {
  it('ignores key order and undefined fields, and sees every value', () => {
    const a = configHash({ source: { host: 'h', password: 'p' }, tables: [1, 2], extra: undefined });
    expect(configHash({ tables: [1, 2], source: { password: 'p', host: 'h' } })).toBe(a);
    expect(configHash({ tables: [1, 2], source: { password: 'changed', host: 'h' } })).not.toBe(a);
    expect(configHash({ tables: [2, 1], source: { password: 'p', host: 'h' } })).not.toBe(a);
    expect(a).toMatch(/^[0-9a-f]{16}$/);
  });

  it('is keyed when given a key: the same value hashes differently under another key', () => {
    const value = { password: 'p' };
    expect(configHash(value, 'k1')).toBe(configHash(value, 'k1'));
    expect(configHash(value, 'k1')).not.toBe(configHash(value, 'k2'));
    expect(configHash(value, 'k1')).not.toBe(configHash(value));
  });
});

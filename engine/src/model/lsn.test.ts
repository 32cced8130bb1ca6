import { describe, expect, it } from 'vitest';
import { EngineError } from '../errors.ts';
import { formatLsn, parseLsn } from './lsn.ts';

describe('parseLsn', () => {
  it('reads the two hex halves', () => {
    expect(parseLsn('16/B374D848')).toBe(0x16_b374_d848n);
    expect(parseLsn('0/0')).toBe(0n);
    expect(parseLsn('ffffffff/ffffffff')).toBe(2n ** 64n - 1n);
    expect(parseLsn('00000001/00000000')).toBe(2n ** 32n);
  });

  it.each([
    '',
    '0',
    '/0',
    '0/',
    '0/0/0',
    '123456789/0',
    '0/123456789',
    'G/0',
    ' 0/0',
    '0/0 ',
    '-1/0',
    '0x1/0',
  ])('refuses %j with a decode error', (text) => {
    expect(() => parseLsn(text)).toThrow(EngineError);
    try {
      parseLsn(text);
    } catch (error) {
      expect((error as EngineError).kind).toBe('decode');
    }
  });
});

describe('formatLsn', () => {
  it('prints upper-case hex halves without leading zeros', () => {
    expect(formatLsn(0x16_b374_d848n)).toBe('16/B374D848');
    expect(formatLsn(0n)).toBe('0/0');
    expect(formatLsn(2n ** 32n)).toBe('1/0');
    expect(formatLsn(2n ** 64n - 1n)).toBe('FFFFFFFF/FFFFFFFF');
  });

  it('round trips through parseLsn', () => {
    for (const lsn of [1n, 0xdead_beefn, 0x1_0000_0001n, 0x7fff_ffff_ffff_ffffn, 2n ** 64n - 2n]) {
      expect(parseLsn(formatLsn(lsn))).toBe(lsn);
    }
  });

  it('refuses values outside the unsigned 64-bit range', () => {
    expect(() => formatLsn(-1n)).toThrow(EngineError);
    expect(() => formatLsn(2n ** 64n)).toThrow(EngineError);
  });
});

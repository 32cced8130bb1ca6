import { describe, expect, it } from 'vitest';
import { defaultRetryBackoff, jitteredDelayMs } from './supervisor.ts';

describe('jitteredDelayMs', () => {
  it('waits between half and all of the backoff', () => {
    expect(jitteredDelayMs(4_000, () => 0)).toBe(2_000);
    expect(jitteredDelayMs(4_000, () => 0.999_999)).toBe(4_000);
    expect(jitteredDelayMs(1_000, () => 0.5)).toBe(750);
  });

  it('caps the default policy at a few seconds', () => {
    expect(defaultRetryBackoff.initialMs).toBeLessThanOrEqual(1_000);
    expect(defaultRetryBackoff.maxMs).toBeLessThanOrEqual(5_000);
  });
});

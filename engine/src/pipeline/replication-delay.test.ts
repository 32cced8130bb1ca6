import { describe, expect, it } from 'vitest';
import { lagSecondsOf, ReplicationDelay } from './replication-delay.ts';

const micros = (ms: number) => BigInt(ms) * 1000n;

describe('ReplicationDelay', () => {
  it('is 0 with nothing received, and while every transaction received is durable', () => {
    const delay = new ReplicationDelay();
    expect(delay.secondsAt(1_000_000)).toBe(0);
    delay.begun(100n, micros(10_000));
    delay.acknowledged(150n);
    // An hour later, idle: still caught up.
    expect(delay.secondsAt(3_610_000)).toBe(0);
    expect(delay.lastAppliedCommitTime).toEqual(new Date(10_000));
  });

  it('counts from the commit time of the oldest transaction not yet durable', () => {
    const delay = new ReplicationDelay();
    delay.begun(100n, micros(10_000));
    delay.begun(200n, micros(12_000));
    delay.begun(300n, micros(15_000));
    expect(delay.secondsAt(20_000)).toBe(10);
    // A batch made the first two durable (acknowledged at the second's commit end).
    delay.acknowledged(250n);
    expect(delay.secondsAt(20_000)).toBe(5);
    expect(delay.lastAppliedCommitTime).toEqual(new Date(12_000));
    // The acknowledged position is the commit's end: past its final LSN.
    delay.acknowledged(301n);
    expect(delay.secondsAt(20_000)).toBe(0);
  });

  it('never reads a commit time in the future as negative', () => {
    const delay = new ReplicationDelay();
    delay.begun(100n, micros(50_000));
    expect(delay.secondsAt(49_000)).toBe(0);
  });

  it('counts a transaction begun again after a reconnect once', () => {
    const delay = new ReplicationDelay();
    delay.begun(100n, micros(10_000));
    delay.begun(200n, micros(20_000));
    delay.begun(100n, micros(10_000));
    delay.acknowledged(150n);
    expect(delay.secondsAt(30_000)).toBe(10);
  });

  it('holds one entry per second of commits, erring by under a second upwards', () => {
    const delay = new ReplicationDelay();
    // 100,000 transactions over 10 seconds.
    for (let index = 0; index < 100_000; index++)
      delay.begun(BigInt(1_000 + index * 10), micros(Math.floor(index / 10)));
    // The first half durable: what waits began at 5 s (its entry at most 1 s earlier).
    delay.acknowledged(BigInt(1_000 + 50_000 * 10));
    const seconds = delay.secondsAt(20_000);
    expect(seconds).toBeGreaterThanOrEqual(15);
    expect(seconds).toBeLessThanOrEqual(16);
    delay.acknowledged(BigInt(1_000 + 100_000 * 10));
    expect(delay.secondsAt(20_000)).toBe(0);
  });
});

describe('lagSecondsOf', () => {
  it('counts from lagSince while the engine streams, 0 when caught up, nothing otherwise', () => {
    const now = 100_000;
    expect(lagSecondsOf({ phase: 'running', lagSince: null }, now)).toBe(0);
    expect(lagSecondsOf({ phase: 'running', lagSince: new Date(now - 4_400) }, now)).toBe(4);
    expect(lagSecondsOf({ phase: 'pausing', lagSince: new Date(now + 5_000) }, now)).toBe(0);
    for (const phase of ['paused', 'failed', 'snapshot', 'setup'] as const)
      expect(lagSecondsOf({ phase, lagSince: new Date(0) }, now)).toBeUndefined();
    expect(lagSecondsOf(undefined, now)).toBeUndefined();
  });
});

import { describe, expect, it } from 'vitest';
import { EngineError } from '../../errors.ts';
import { SnapshotVisibility } from './snapshot-visibility.ts';

describe('snapshot visibility', () => {
  it('sees transactions below xmin, and below xmax unless in progress', () => {
    const snapshot = new SnapshotVisibility('742:745:742,744');
    expect(snapshot.visible(741)).toBe(true);
    expect(snapshot.visible(742)).toBe(false);
    expect(snapshot.visible(743)).toBe(true);
    expect(snapshot.visible(744)).toBe(false);
    expect(snapshot.visible(745)).toBe(false);
    expect(snapshot.visible(900)).toBe(false);
  });

  it('compares 32-bit xids with 64-bit snapshot ids across a wraparound', () => {
    // Epoch 1: xmin is 2^32 + 5, just after the 32-bit counter wrapped.
    const base = 2n ** 32n;
    const snapshot = new SnapshotVisibility(`${base + 5n}:${base + 10n}:${base + 7n}`);
    expect(snapshot.visible(0xffff_fff0)).toBe(true); // epoch 0, before the wrap
    expect(snapshot.visible(4)).toBe(true);
    expect(snapshot.visible(7)).toBe(false);
    expect(snapshot.visible(8)).toBe(true);
    expect(snapshot.visible(10)).toBe(false);
    // xmin just before the wrap, xmax after it.
    const straddling = new SnapshotVisibility(`${base - 2n}:${base + 3n}:`);
    expect(straddling.visible(0xffff_fffe)).toBe(true);
    expect(straddling.visible(1)).toBe(true);
    expect(straddling.visible(3)).toBe(false);
  });

  it('refuses a malformed snapshot', () => {
    expect(() => new SnapshotVisibility('nonsense')).toThrow(EngineError);
  });
});

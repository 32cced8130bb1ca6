// A small seeded generator (mulberry32) for tests that draw random cases:
// the same cases every run, so a failure reproduces.

/** Numbers in [0, 1) from `seed`. */
export function seededRandom(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let mixed = Math.imul(state ^ (state >>> 15), 1 | state);
    mixed = (mixed + Math.imul(mixed ^ (mixed >>> 7), 61 | mixed)) ^ mixed;
    return ((mixed ^ (mixed >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Whole numbers in [0, below) from `seed`. */
export function seededIntegers(seed: number): (below: number) => number {
  const random = seededRandom(seed);
  return (below) => Math.floor(random() * below);
}

// Shared settings of the property-based (fuzz) tests, `*.fuzz.test.ts`
// (docs/security.md, "Fuzzing"). Each run draws a new seed, so the suite keeps
// trying new inputs; fast-check prints the seed and the path of a failing case,
// and these variables replay it:
//
//   TRIBUTARY_FUZZ_SEED=<seed> TRIBUTARY_FUZZ_PATH=<path> vitest run --project unit <file>
//
// TRIBUTARY_FUZZ_RUNS=<factor> multiplies every property's case count and lifts
// the time cap below, for a longer session by hand.
import fc from 'fast-check';

const seedText = process.env.TRIBUTARY_FUZZ_SEED;
const pathText = process.env.TRIBUTARY_FUZZ_PATH;
const runFactor = Number(process.env.TRIBUTARY_FUZZ_RUNS ?? '1');

/**
 * A property stops drawing cases (and passes, if none failed) after this long:
 * on a slow or busy machine it runs fewer cases instead of overrunning the
 * test's time limit. Nothing asserts on it; it only bounds the run.
 */
const propertyTimeCapMs = 3_000;

/** fc.assert's parameters for a property of `numRuns` cases, with known failures as `examples`. */
export function fuzzParameters<T>(numRuns: number, examples: T[] = []): fc.Parameters<T> {
  const factor = Number.isFinite(runFactor) && runFactor > 0 ? runFactor : 1;
  return {
    numRuns: Math.max(1, Math.round(numRuns * factor)),
    examples,
    ...(seedText !== undefined ? { seed: Number(seedText) } : {}),
    ...(pathText !== undefined ? { path: pathText } : {}),
    plugins: factor === 1 ? [fc.interruptAfterTimeLimit(propertyTimeCapMs)] : [],
  };
}

export interface AllocationRecord {
  /** The largest Buffer made by one call. */
  readonly largest: number;
  /** Bytes of every Buffer made, added up. */
  readonly total: number;
}

type BufferMaker = 'alloc' | 'allocUnsafe' | 'allocUnsafeSlow' | 'concat' | 'from';
const bufferMakers: readonly BufferMaker[] = ['alloc', 'allocUnsafe', 'allocUnsafeSlow', 'concat', 'from'];

/** Counts Buffers made until the returned function is called, which returns the count. */
function countFromNow(): () => AllocationRecord {
  let largest = 0;
  let total = 0;
  let depth = 0;
  const target = Buffer as unknown as Record<BufferMaker, (...args: unknown[]) => Buffer>;
  const originals = bufferMakers.map((name) => [name, target[name]] as const);
  for (const [name, original] of originals) {
    target[name] = (...args: unknown[]) => {
      depth++;
      try {
        const made = original.apply(Buffer, args);
        if (depth === 1) {
          largest = Math.max(largest, made.length);
          total += made.length;
        }
        return made;
      } finally {
        depth--;
      }
    };
  }
  return () => {
    for (const [name, original] of originals) target[name] = original;
    return { largest, total };
  };
}

/**
 * Runs `work` with Buffer's allocating functions counted, and returns what it
 * allocated, and its error if it threw. Only the outermost call counts
 * (Buffer.concat allocates through allocUnsafe). Typed arrays made with `new`
 * are not seen: the parsers under test make their buffers through these.
 */
export function countBufferAllocations(work: () => unknown): AllocationRecord & { readonly error?: unknown } {
  const stop = countFromNow();
  try {
    work();
    return stop();
  } catch (error) {
    return { ...stop(), error };
  }
}

/** countBufferAllocations of async work (nothing else may run on this thread meanwhile). */
export async function countBufferAllocationsAsync(
  work: () => Promise<unknown>,
): Promise<AllocationRecord & { readonly error?: unknown }> {
  const stop = countFromNow();
  try {
    await work();
    return stop();
  } catch (error) {
    return { ...stop(), error };
  }
}

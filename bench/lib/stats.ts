// Medians and spread of repeated runs, and the two-system figures of the results file.
import { loadAverage } from './machine.ts';

export interface Summary {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  readonly runs: readonly number[];
}

export function summarize(runs: readonly number[]): Summary {
  const sorted = [...runs].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  const median =
    sorted.length % 2 === 1
      ? (sorted[middle] ?? Number.NaN)
      : ((sorted[middle - 1] ?? Number.NaN) + (sorted[middle] ?? Number.NaN)) / 2;
  return {
    median: Math.round(median),
    min: Math.round(sorted[0] ?? Number.NaN),
    max: Math.round(sorted.at(-1) ?? Number.NaN),
    runs: runs.map(Math.round),
  };
}

/**
 * One figure of the results file: both systems' runs and `ratio` of the
 * medians, Tributary ÷ the other for throughput, the other ÷ Tributary for a
 * latency (above 1 is better for Tributary either way).
 */
export interface Figure {
  readonly unit: string;
  readonly tributary: Summary;
  readonly other: Summary & { readonly system: string };
  readonly ratio: number;
  /**
   * The median of the rounds' own ratios, when both systems ran once a round
   * (runs in round order): the two runs of a round are minutes apart, so a
   * machine that speeds up or slows down between rounds moves it less than
   * `ratio`.
   */
  readonly pairedRatio?: number;
  readonly loadAverage: readonly number[];
}

export function figure(
  unit: 'rows/s' | 'ms',
  tributaryRuns: readonly number[],
  otherSystem: string,
  otherRuns: readonly number[],
): Figure {
  const tributary = summarize(tributaryRuns);
  const other = summarize(otherRuns);
  const ratioOf = (ours: number, theirs: number) => (unit === 'ms' ? theirs / ours : ours / theirs);
  const rounded = (value: number) => Math.round(value * 1000) / 1000;
  const paired =
    tributaryRuns.length === otherRuns.length
      ? summarize(tributaryRuns.map((ours, round) => ratioOf(ours, otherRuns[round] ?? Number.NaN) * 1000))
          .median / 1000
      : undefined;
  return {
    unit,
    tributary,
    other: { system: otherSystem, ...other },
    ratio: rounded(ratioOf(tributary.median, other.median)),
    ...(paired === undefined ? {} : { pairedRatio: rounded(paired) }),
    loadAverage: loadAverage(),
  };
}

/** `<prefix>_p99<suffix>` and `<prefix>_p50<suffix>`: two systems' latency percentiles over the same rounds. */
export function latencyFigures(
  prefix: string,
  suffix: string,
  tributaryRuns: readonly { readonly p50: number; readonly p99: number }[],
  otherSystem: string,
  otherRuns: readonly { readonly p50: number; readonly p99: number }[],
): Record<string, Figure> {
  return Object.fromEntries(
    (['p99', 'p50'] as const).map((percentile) => [
      `${prefix}_${percentile}${suffix}`,
      figure(
        'ms',
        tributaryRuns.map((run) => run[percentile]),
        otherSystem,
        otherRuns.map((run) => run[percentile]),
      ),
    ]),
  );
}

/** A summary as its median and, in parentheses, its range. */
function spread(summary: Summary): string {
  return `${summary.median} (${summary.min}–${summary.max})`;
}

/** One line of a figure taken apart by system or phase (e.g. CPU a row): each one's median and range. */
export function describeEach(name: string, each: Readonly<Record<string, Summary>>, what: string): string {
  const parts = Object.entries(each).map(([part, summary]) => `${part} ${spread(summary)}`);
  return `${name.padEnd(32)} ${parts.join(', ')} ${what}`;
}

export function describe(name: string, value: Figure): string {
  const paired = value.pairedRatio === undefined ? '' : ` (by round ${value.pairedRatio})`;
  return `${name.padEnd(32)} tributary ${spread(value.tributary)} ${value.unit}, ${value.other.system} ${spread(value.other)} ${value.unit}, ratio ${value.ratio}${paired}, load ${value.loadAverage.join(' ')}`;
}

export async function timed<T>(work: () => Promise<T>): Promise<[number, T]> {
  const started = performance.now();
  const result = await work();
  return [(performance.now() - started) / 1000, result];
}

/** Polls `check` every `intervalMs` until it holds; throws after `timeoutMs`. */
export async function until(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
  intervalMs = 50,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not reached within ${timeoutMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Rotates `systems` by `round` so each goes first in turn. */
export function alternate<T>(systems: readonly T[], round: number): T[] {
  const shift = round % systems.length;
  return [...systems.slice(shift), ...systems.slice(0, shift)];
}

// The benchmark's settings, read once from the environment.
//
//   BENCH_ROWS             rows per throughput run (default 1,000,000)
//   BENCH_ROUNDS           rounds per figure, systems alternating (default 2, at least 2)
//   BENCH_BIG_ROWS         rows of the single big transaction (default 2,000,000)
//   BENCH_LATENCY_SECONDS  length of a latency run (default 20)
//   BENCH_RATE             rows/s written during a latency run (default 5,000)
//   BENCH_ONLY             comma-separated groups to run (default: all), see `groups`
//   BENCH_LIFECYCLE_ROWS   rows of the table table-lifecycle adds and resyncs (default 200,000)
//   BENCH_LIFECYCLE_DESTINATIONS  comma-separated destinations of table-lifecycle:
//                          pg, clickhouse, kafka, snowflake (default pg)
export const groups = [
  'pg-snapshot',
  'pg-cdc',
  'pg-latency',
  'clickhouse',
  'kafka',
  'kafka-latency',
  'big-transaction',
  'standalone',
  'diagnostic',
  'table-lifecycle',
] as const;
export type Group = (typeof groups)[number];

function positive(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value <= 0) throw new Error(`${name}=${text}: a positive integer expected`);
  return value;
}

export const lifecycleDestinations = ['pg', 'clickhouse', 'kafka', 'snowflake'] as const;
export type LifecycleDestination = (typeof lifecycleDestinations)[number];

function selectedDestinations(): readonly LifecycleDestination[] {
  const text = process.env.BENCH_LIFECYCLE_DESTINATIONS ?? '';
  if (text.trim() === '') return ['pg'];
  const chosen = text.split(',').map((name) => name.trim());
  for (const name of chosen) {
    if (!(lifecycleDestinations as readonly string[]).includes(name))
      throw new Error(
        `BENCH_LIFECYCLE_DESTINATIONS: unknown destination ${name}; destinations: ${lifecycleDestinations.join(', ')}`,
      );
  }
  return chosen as LifecycleDestination[];
}

function selectedGroups(): ReadonlySet<Group> {
  const text = process.env.BENCH_ONLY ?? '';
  if (text.trim() === '') return new Set(groups);
  const chosen = text.split(',').map((name) => name.trim());
  for (const name of chosen) {
    if (!(groups as readonly string[]).includes(name))
      throw new Error(`BENCH_ONLY: unknown group ${name}; groups: ${groups.join(', ')}`);
  }
  return new Set(chosen as Group[]);
}

export const benchConfig = Object.freeze({
  rows: positive('BENCH_ROWS', 1_000_000),
  rounds: Math.max(2, positive('BENCH_ROUNDS', 2)),
  bigTransactionRows: positive('BENCH_BIG_ROWS', 2_000_000),
  latencySeconds: positive('BENCH_LATENCY_SECONDS', 20),
  latencyRate: positive('BENCH_RATE', 5_000),
  only: selectedGroups(),
  lifecycleRows: positive('BENCH_LIFECYCLE_ROWS', 200_000),
  lifecycleDestinations: selectedDestinations(),
});

/** A group that failed part-way: what it measured before is still saved beside its failure. */
export class PartialGroupFailure extends Error {
  readonly figures: Record<string, unknown>;

  constructor(message: string, figures: Record<string, unknown>) {
    super(message);
    this.name = 'PartialGroupFailure';
    this.figures = figures;
  }
}

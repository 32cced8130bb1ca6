import { describe, expect, it } from 'vitest';
import { idTextTable } from '../../../test/support/id-text-table.ts';
import type { SourceMessage } from '../connectors/changes.ts';
import type { TransactionPosition } from '../connectors/records.ts';
import type { TrackedRelation } from './relations.ts';
import { TransactionFilter } from './transaction-filter.ts';

const table = idTextTable('t');
const tracked = (sourceName: string): TrackedRelation => ({
  table,
  sourceName,
  projection: [0],
  keepsTupleOrder: true,
});
const begin = (finalLsn: bigint): SourceMessage & { tag: 'begin' } => ({
  tag: 'begin',
  finalLsn,
  commitTimeMicros: 0n,
  xid: 1,
});

function filterOver(
  options: {
    durableLsn?: bigint;
    resumeFrom?: TransactionPosition;
    tableStartLsns?: Map<string, bigint>;
  } = {},
) {
  const resumed: number[] = [];
  let changes = 0;
  const filter = new TransactionFilter({
    durableLsn: options.durableLsn ?? 0n,
    resumeFrom: options.resumeFrom,
    tableStartLsns: options.tableStartLsns ?? new Map(),
    onResumed: () => resumed.push(changes),
  });
  /** Asks the filter about the next change, as the applier does. */
  const holds = (lsn: bigint) => {
    changes++;
    return filter.holds(lsn);
  };
  return { filter, resumed, holds };
}

describe('TransactionFilter', () => {
  it('leaves out transactions that committed before the checkpoint, and applies the rest', () => {
    const { filter, holds } = filterOver({ durableLsn: 1000n });
    expect(filter.atBoundary).toBe(true);
    expect(filter.begin(begin(900n)).kind).toBe('durable');
    expect(filter.atBoundary).toBe(false);
    expect(holds(850n)).toBe(false);
    expect(filter.applies(tracked('public.t'))).toBe(false);
    expect(filter.commit()).toBe(false);
    expect(filter.atBoundary).toBe(true);

    expect(filter.begin(begin(1000n)).kind).toBe('applying');
    expect(filter.transaction).toEqual({ xid: 1, commitLsn: 1000n, commitTimeMicros: 0n });
    expect(holds(950n)).toBe(false);
    expect(filter.applies(tracked('public.t'))).toBe(true);
    expect(filter.commit()).toBe(true);
  });

  it('skips the changes the destination holds of the transaction a batch ended inside, then resumes once', () => {
    const { filter, resumed, holds } = filterOver({
      durableLsn: 500n,
      resumeFrom: { commitLsn: 1000n, changeLsn: 903n, changeRank: 2 },
    });
    expect(filter.begin(begin(1000n)).kind).toBe('resuming');
    // Three changes at 903 (one multi-insert record): the first two are held.
    expect([901n, 903n, 903n, 903n, 904n].map(holds)).toEqual([true, true, true, false, false]);
    expect(resumed).toEqual([4]);
    expect(filter.state.kind).toBe('applying');
    expect(filter.position).toEqual({ commitLsn: 1000n, changeLsn: 904n, changeRank: 1 });
    expect(filter.commit()).toBe(true);
    // The position was of that transaction only.
    expect(filter.begin(begin(1000n)).kind).toBe('applying');
  });

  it('applies a transaction in full when the position is of another one', () => {
    const { filter, resumed, holds } = filterOver({
      resumeFrom: { commitLsn: 1000n, changeLsn: 903n, changeRank: 2 },
    });
    expect(filter.begin(begin(2000n)).kind).toBe('applying');
    expect([901n, 903n].map(holds)).toEqual([false, false]);
    expect(resumed).toEqual([]);
  });

  it('applies a table’s changes only from transactions committed at or after its load', () => {
    const { filter, holds } = filterOver({ tableStartLsns: new Map([['public.t', 1500n]]) });
    filter.begin(begin(1000n));
    holds(990n);
    expect(filter.applies(tracked('public.t'))).toBe(false);
    expect(filter.applies(tracked('public.other'))).toBe(true);
    filter.commit();
    filter.begin(begin(1500n));
    holds(1490n);
    expect(filter.applies(tracked('public.t'))).toBe(true);
  });
});

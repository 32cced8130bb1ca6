import { describe, expect, it } from 'vitest';
import { type MirrorFacts, noticesOf, type ToldState } from './mirror-notices.ts';

const started = new Date('2026-01-01T00:00:00Z');
const later = new Date('2026-01-01T00:05:00Z');
const before = new Date('2025-12-31T00:00:00Z');
const running: MirrorFacts = {
  phase: 'running',
  phaseSince: later,
  errorMessage: null,
  slot: undefined,
  tables: [],
};

/** Walks a mirror through looks, returning the kinds told at each. */
function walk(looks: readonly MirrorFacts[], told?: ToldState) {
  let state = told;
  return looks.map((facts) => {
    const next = noticesOf('m', state, facts, later, started);
    state = next.told;
    return next.notices.map((notice) => notice.kind + (notice.table ? `:${notice.table}` : ''));
  });
}

describe('noticesOf', () => {
  it('tells a failure once and its recovery once, however many looks see them', () => {
    const failed: MirrorFacts = { ...running, phase: 'failed', errorMessage: 'destination refused' };
    expect(walk([running, failed, failed, { ...failed, phase: 'paused' }, running, running])).toEqual([
      [],
      ['mirror_failed'],
      [],
      [],
      ['mirror_recovered'],
      [],
    ]);
  });

  it('tells a failure of another cause again, and none for a dropped mirror', () => {
    const failed: MirrorFacts = { ...running, phase: 'failed', errorMessage: 'one' };
    expect(walk([failed, { ...failed, errorMessage: 'two' }, { ...failed, phase: 'terminated' }])).toEqual([
      ['mirror_failed'],
      ['mirror_failed'],
      [],
    ]);
  });

  it('takes a failure from before the process started as told, and one since as news', () => {
    const failed: MirrorFacts = { ...running, phase: 'failed', errorMessage: 'x', phaseSince: before };
    expect(walk([failed, running])).toEqual([[], ['mirror_recovered']]);
    expect(walk([{ ...failed, phaseSince: later }])).toEqual([['mirror_failed']]);
  });

  it('tells a slot in danger per reason and its recovery, not an unknown reading', () => {
    const slot = (
      healthy: boolean | null,
      reason: 'Healthy' | 'WalAtRisk' | 'Invalidated' | 'SourceUnreachable',
    ) => ({
      ...running,
      slot: { healthy, reason, message: reason },
    });
    expect(
      walk([
        slot(true, 'Healthy'),
        slot(false, 'WalAtRisk'),
        slot(null, 'SourceUnreachable'),
        slot(false, 'WalAtRisk'),
        slot(false, 'Invalidated'),
        slot(true, 'Healthy'),
        slot(true, 'Healthy'),
      ]),
    ).toEqual([[], ['slot_in_danger'], [], [], ['slot_in_danger'], ['slot_recovered'], []]);
  });

  it("tells a table's fault once and its streaming again, forgetting a removed table", () => {
    const table = (state: 'streaming' | 'errored' | 'resyncing' | 'removed', name = 'public.t') => ({
      sourceTable: name,
      state,
      stateSince: later,
      problem:
        state === 'errored'
          ? { kind: 'schema_mismatch' as const, message: 'refused', remedy: 'resync' }
          : null,
    });
    expect(
      walk([
        { ...running, tables: [table('streaming'), table('streaming', 'public.u')] },
        { ...running, tables: [table('errored'), table('errored', 'public.u')] },
        { ...running, tables: [table('errored'), table('removed', 'public.u')] },
        { ...running, tables: [table('resyncing')] },
        { ...running, tables: [table('streaming')] },
      ]),
    ).toEqual([
      [],
      ['table_errored:public.t', 'table_errored:public.u'],
      [],
      [],
      ['table_recovered:public.t'],
    ]);
    const [first] = noticesOf(
      'm',
      undefined,
      { ...running, tables: [table('errored')] },
      later,
      started,
    ).notices;
    expect(first).toMatchObject({ reason: 'schema_mismatch', message: 'refused; resync' });
  });
});

import { describe, expect, it } from 'vitest';
import { listText, statusText } from './mirror-text.ts';
import { type MirrorObject, mirrorStatusView, mirrorSummary } from './mirror-view.ts';

const since = '2024-05-01T10:00:00.000Z';
const condition = (type: string, status: 'True' | 'False' | 'Unknown', reason: string, message = '') => ({
  type,
  status,
  reason,
  message,
  lastTransitionTime: since,
});
const table = (
  source: string,
  state: 'TABLE_STATE_STREAMING' | 'TABLE_STATE_ERRORED' | 'TABLE_STATE_HELD',
) => ({
  sourceTableIdentifier: source,
  destinationTableIdentifier: `dst.${source.split('.')[1]}`,
  state,
  stateSince: since,
  rowsApplied: { inserts: '5', updates: '2', deletes: '1' },
  lastAppliedLsn: '100',
});

const mirror: MirrorObject = {
  metadata: {
    name: 'pg-to-ch-1a2b3c4d',
    namespace: 'shop',
    generation: 3,
    annotations: { 'tributary.dev/name': 'pg_to_ch' },
  },
  spec: { sourcePeer: 'shop', destinationPeer: 'analytics', state: 'Running' },
  status: {
    observedGeneration: 2,
    phase: 'STATUS_RUNNING',
    lagSeconds: 4,
    rowsSynced: '1200',
    conditions: [
      condition('Ready', 'True', 'Running', 'streaming changes'),
      condition('SlotHealthy', 'False', 'RetainedWalHigh', 'slot keeps 3 GB of WAL'),
    ],
    snapshot: {
      tables: [{ table: 'public.orders', partitionsCompleted: 4, partitionsTotal: 4, rowsSynced: '1000' }],
    },
    tables: [
      { ...table('public.orders', 'TABLE_STATE_STREAMING'), lastCommitTime: since },
      {
        ...table('public.items', 'TABLE_STATE_ERRORED'),
        error: { kind: 'schema_mismatch', message: 'column price changed type', remedy: 'resync the table' },
        behindLsn: '90',
      },
      table('public.notes', 'TABLE_STATE_HELD'),
    ],
  },
};

describe('what the plugin shows of a Mirror', () => {
  it('sums a mirror up in one row', () => {
    const summary = mirrorSummary(mirror);
    expect(summary).toEqual({
      namespace: 'shop',
      name: 'pg-to-ch-1a2b3c4d',
      source: 'shop',
      destination: 'analytics',
      state: 'Running',
      phase: 'STATUS_RUNNING',
      ready: 'True',
      lagSeconds: 4,
      tables: 3,
      erroredTables: 1,
      heldTables: 1,
    });
    expect(listText([summary], true).split('\n')).toEqual([
      'NAMESPACE  NAME               SOURCE  DESTINATION  STATE    PHASE    READY  LAG  TABLES  ERRORED',
      'shop       pg-to-ch-1a2b3c4d  shop    analytics    Running  running  True   4s   3       1 (+1 held)',
    ]);
  });

  it('shows tables with their loads and problems, the slot and the conditions', () => {
    const view = mirrorStatusView(mirror);
    expect(view.apiName).toBe('pg_to_ch');
    expect(view.statusBehindSpec).toBe(true);
    expect(view.slot).toEqual({
      health: 'unhealthy',
      reason: 'RetainedWalHigh',
      message: 'slot keeps 3 GB of WAL',
      since,
    });
    expect(view.tables[0]?.initialLoad).toEqual({ rows: '1000', partitionsCompleted: 4, partitionsTotal: 4 });
    expect(view.tables[1]?.problem).toEqual({
      kind: 'schema_mismatch',
      message: 'column price changed type',
      remedy: 'resync the table',
      behindLsn: '90',
    });
    const text = statusText(view);
    expect(text).toContain('Mirror:       shop/pg-to-ch-1a2b3c4d (API name pg_to_ch)');
    expect(text).toContain('Slot:         unhealthy (RetainedWalHigh): slot keeps 3 GB of WAL');
    expect(text).toContain('(the operator has not caught up with the latest spec)');
    expect(text).toMatch(
      /public\.items +dst\.items +errored +- +5\/2\/1 +- +schema_mismatch: column price changed type \(behind from LSN 90\); resync the table/,
    );
  });

  it('reads a Mirror the operator has not written a status for', () => {
    const fresh: MirrorObject = { metadata: { name: 'new', namespace: 'shop' }, spec: mirror.spec };
    expect(mirrorSummary(fresh)).toMatchObject({ phase: null, ready: null, lagSeconds: null, tables: 0 });
    const view = mirrorStatusView(fresh);
    expect(view).toMatchObject({ slot: null, tables: [], conditions: [], statusBehindSpec: false });
    expect(statusText(view)).toContain('Slot:         not read yet');
    expect(listText([], false)).toBe('No mirrors found.');
  });
});

import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { TableStatus } from '../catalog/catalog.ts';
import { registerTableMetrics } from './table-metrics.ts';

const table = (sourceTable: string, state: TableStatus['state'], inserts: bigint): TableStatus => ({
  sourceTable,
  destinationTable: sourceTable,
  state,
  stateSince: new Date(0),
  inserts,
  updates: 2n,
  deletes: 0n,
  lastLsn: 0n,
  lastCommitTime: null,
  problem: null,
  behindLsn: null,
  resyncToken: null,
});

describe('per-table metrics', () => {
  it("shows each mapped table's state and rows by operation, labelled by schema and name, and no removed table", async () => {
    const registry = new Registry();
    let tables = [
      table('public.orders', 'streaming', 5n),
      table('audit.orders', 'loading', 0n),
      table('public.gone', 'removed', 9n),
    ];
    registerTableMetrics(registry, async () => [{ mirror: 'm', tables }]);
    const lines = async () =>
      (await registry.metrics()).split('\n').filter((line) => line !== '' && !line.startsWith('#'));
    expect(await lines()).toEqual([
      'tributary_mirror_table_state{mirror="m",table="public.orders",state="TABLE_STATE_STREAMING"} 1',
      'tributary_mirror_table_state{mirror="m",table="audit.orders",state="TABLE_STATE_LOADING"} 1',
      'tributary_mirror_table_rows_applied_total{mirror="m",table="public.orders",operation="insert"} 5',
      'tributary_mirror_table_rows_applied_total{mirror="m",table="public.orders",operation="update"} 2',
      'tributary_mirror_table_rows_applied_total{mirror="m",table="public.orders",operation="delete"} 0',
      'tributary_mirror_table_rows_applied_total{mirror="m",table="audit.orders",operation="insert"} 0',
      'tributary_mirror_table_rows_applied_total{mirror="m",table="audit.orders",operation="update"} 2',
      'tributary_mirror_table_rows_applied_total{mirror="m",table="audit.orders",operation="delete"} 0',
    ]);
    // The next scrape reads the catalog again: a moved state replaces the old series, totals are the catalog's.
    tables = [table('public.orders', 'streaming', 7n)];
    const next = await lines();
    expect(next.filter((line) => line.startsWith('tributary_mirror_table_state'))).toEqual([
      'tributary_mirror_table_state{mirror="m",table="public.orders",state="TABLE_STATE_STREAMING"} 1',
    ]);
    expect(next).toContain(
      'tributary_mirror_table_rows_applied_total{mirror="m",table="public.orders",operation="insert"} 7',
    );
    expect(next.some((line) => line.includes('table="audit.orders"'))).toBe(false);
  });
});

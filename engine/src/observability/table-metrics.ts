// Per-table metrics of every mirror, read from the catalog at scrape time
// with the mirror gauges (api-server/src/http/metrics.ts serves them, in
// both modes): a table's state and the rows CDC applied to it by operation.
// Read from the catalog rather than counted by the engine, so they hold
// across engine restarts and show while no engine runs (a paused mirror, an
// errored table). Cardinality is bounded by the mirrors' mappings: one state
// series and three counters per mapped table; a removed table leaves.
import { Counter, Gauge, type Registry } from 'prom-client';
import { type TableStatus, tableStateNames } from '../catalog/catalog.ts';

export interface MirrorTablesSample {
  readonly mirror: string;
  readonly tables: readonly TableStatus[];
}

/** `table` is the source table as `schema.table`, as the engine's per-table series name it. */
function labelsOf(mirror: string, sourceTable: string): Record<'mirror' | 'table', string> {
  return { mirror, table: sourceTable };
}

export const tableMetricNames = {
  state: 'tributary_mirror_table_state',
  rowsApplied: 'tributary_mirror_table_rows_applied_total',
} as const;

export function registerTableMetrics(
  registry: Registry,
  samples: () => Promise<readonly MirrorTablesSample[]>,
): void {
  const mapped = async () =>
    (await samples()).flatMap(({ mirror, tables }) =>
      tables.filter((table) => table.state !== 'removed').map((table) => ({ mirror, table })),
    );
  new Gauge({
    name: tableMetricNames.state,
    help: "Each mapped table's state (1 for its state: TABLE_STATE_PENDING, _LOADING, _STREAMING, _RESYNCING, _HELD, _ERRORED)",
    labelNames: ['mirror', 'table', 'state'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const { mirror, table } of await mapped()) {
        this.set({ ...labelsOf(mirror, table.sourceTable), state: tableStateNames[table.state] }, 1);
      }
    },
  });
  new Counter({
    name: tableMetricNames.rowsApplied,
    help: 'Row changes CDC applied to each mapped table, by operation (insert, update, delete)',
    labelNames: ['mirror', 'table', 'operation'],
    registers: [registry],
    async collect() {
      // The catalog holds the totals: the counter is set to them at every scrape.
      this.reset();
      for (const { mirror, table } of await mapped()) {
        const labels = labelsOf(mirror, table.sourceTable);
        this.inc({ ...labels, operation: 'insert' }, Number(table.inserts));
        this.inc({ ...labels, operation: 'update' }, Number(table.updates));
        this.inc({ ...labels, operation: 'delete' }, Number(table.deletes));
      }
    },
  });
}

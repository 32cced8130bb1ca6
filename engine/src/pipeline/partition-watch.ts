// What PostgreSQL does not publish of a partitioned table. A publication
// that publishes via the root (the mirror's own does) sends every partition's
// row changes under the partitioned table's name, but nothing when a single
// partition is truncated, when one is detached or dropped (its rows leave
// the table), or when a table that holds rows is attached (they join it). The
// destination would then hold rows the source's table no longer has, or miss
// rows it has, and nothing would say so.
//
// So the mirror looks, as it does for its source tables (source-tables-watch.ts:
// one query every lookEveryMs while streaming, the first at the stream's
// start), at the leaf partitions of each mapped partitioned table, and holds
// them against the leaves recorded when the table's load from nothing began
// (recordLoadedPartitions) or at the last look:
// - a leaf gone: detached, or dropped;
// - a leaf with new storage (relfilenode): truncated, unless the TRUNCATE of
//   the whole table that the stream carried gave it (the leaf's pg_class row
//   was written by that TRUNCATE's transaction); VACUUM FULL, CLUSTER or a
//   table rewrite give new storage too and cannot be told from it;
// - a new leaf holding a row written no later than the transaction that made
//   it a partition: attached with rows. A partition created empty (CREATE
//   TABLE … PARTITION OF, the daily partition) is no change of rows at all.
// A look is judged once the destination holds every change written before
// it, so a TRUNCATE of the whole table committed before the look is known by
// then. What the mirror does about a finding is the policy's (schemaChanges;
// partition-changes.ts).
import type { Catalog, RecordedLeaf } from '../catalog/catalog.ts';
import type { DestinationTable } from '../connectors/records.ts';
import type { PartitionLeaf, Source } from '../connectors/source.ts';
import { formatTableName, type TableName } from '../resources/mirror.ts';
import { type MirrorContext, watched } from './context.ts';
import { lookEveryMs } from './source-tables-watch.ts';

/** A change of a partitioned table's rows PostgreSQL did not publish. */
export interface PartitionChange {
  readonly kind: 'truncated' | 'detached' | 'attached';
  /** The leaf's name (`schema.table`): as recorded for a leaf gone, as it is now otherwise. */
  readonly leaf: string;
}

/** A mapped partitioned table whose leaves changed in ways PostgreSQL did not publish. */
export interface PartitionFinding {
  readonly sourceTable: string;
  readonly changes: readonly PartitionChange[];
  /** The leaves now: recorded once the finding is acted on (PartitionWatch.accept). */
  readonly leaves: readonly RecordedLeaf[];
}

/** A leaf as recorded. */
export function recordedLeaf(leaf: PartitionLeaf): RecordedLeaf {
  return { oid: leaf.oid, name: formatTableName(leaf.name), fileNode: leaf.fileNode };
}

/**
 * The leaves' changes between the record and now that need no look at rows:
 * leaves gone, leaves with new storage not given by an explained TRUNCATE
 * (`explained`: the transactions of the whole table's TRUNCATEs the stream
 * carried), and the leaves that are new (attached, or created: the caller
 * looks at their rows).
 */
export function comparedLeaves(
  recorded: readonly RecordedLeaf[],
  current: readonly PartitionLeaf[],
  explained: ReadonlySet<number>,
): { readonly changes: PartitionChange[]; readonly added: PartitionLeaf[] } {
  const now = new Map(current.map((leaf) => [leaf.oid, leaf]));
  const before = new Set(recorded.map((leaf) => leaf.oid));
  const changes: PartitionChange[] = [];
  for (const leaf of recorded) {
    const found = now.get(leaf.oid);
    if (!found) changes.push({ kind: 'detached', leaf: leaf.name });
    else if (found.fileNode !== leaf.fileNode && !explained.has(found.classXmin)) {
      changes.push({ kind: 'truncated', leaf: formatTableName(found.name) });
    }
  }
  const added = current.filter((leaf) => !before.has(leaf.oid));
  return { changes, added };
}

/** How many TRUNCATE transactions of one table are remembered to explain new storage. */
const explainedPerTable = 64;

export interface PartitionWatchOptions {
  readonly source: Source;
  readonly catalog: Catalog;
  readonly mirror: string;
  /** The mapped tables to watch (those the stream applies); the source says which are partitioned. */
  readonly tables: readonly TableName[];
}

export class PartitionWatch {
  readonly #options: PartitionWatchOptions;
  #recorded = new Map<string, readonly RecordedLeaf[]>();
  /** Per source table, the transactions of TRUNCATEs of the whole table the stream carried. */
  readonly #truncates = new Map<string, number[]>();
  #lastLookMs = Number.NEGATIVE_INFINITY;
  /** The last look, judged once the destination holds what was written before it. */
  #pending:
    | { readonly walLsn: bigint; readonly leaves: ReadonlyMap<string, readonly PartitionLeaf[]> }
    | undefined;

  constructor(options: PartitionWatchOptions) {
    this.#options = options;
  }

  /** Reads the records; a partitioned table without one gets its leaves of now recorded. */
  async start(): Promise<void> {
    const { catalog, mirror, source, tables } = this.#options;
    if (tables.length === 0) return;
    this.#recorded = new Map(await catalog.listPartitionLeaves(mirror));
    const unrecorded = tables.filter((table) => !this.#recorded.has(formatTableName(table)));
    if (unrecorded.length === 0) return;
    const { byTable } = await source.partitionLeaves(unrecorded);
    for (const [sourceTable, leaves] of byTable) await this.accept(sourceTable, leaves.map(recordedLeaf));
  }

  /** The stream carried a TRUNCATE of the whole table in transaction `xid`. */
  truncated(sourceTable: string, xid: number): void {
    const xids = this.#truncates.get(sourceTable) ?? [];
    xids.push(xid);
    if (xids.length > explainedPerTable) xids.shift();
    this.#truncates.set(sourceTable, xids);
  }

  /** Records a table's leaves as its destination holds them from now on. */
  async accept(sourceTable: string, leaves: readonly RecordedLeaf[]): Promise<void> {
    await this.#options.catalog.recordPartitionLeaves(this.#options.mirror, sourceTable, leaves);
    this.#recorded.set(sourceTable, leaves);
  }

  /**
   * Called by the stream loop as it goes: judges the last look once
   * `durableLsn` (what the destination holds) has passed it, and looks again
   * at most every lookEveryMs. Returns the tables with findings; those
   * without are recorded as they are now.
   */
  async check(nowMs: number, durableLsn: bigint): Promise<PartitionFinding[] | undefined> {
    const pending = this.#pending;
    if (pending && durableLsn >= pending.walLsn) {
      this.#pending = undefined;
      const findings = await this.#judge(pending.leaves);
      if (findings.length > 0) return findings;
    }
    if (this.#pending || nowMs - this.#lastLookMs < lookEveryMs) return undefined;
    this.#lastLookMs = nowMs;
    const watched = this.#options.tables.filter((table) => this.#recorded.has(formatTableName(table)));
    if (watched.length === 0) return undefined;
    const { byTable, walLsn } = await this.#options.source.partitionLeaves(watched);
    this.#pending = { walLsn, leaves: byTable };
    return undefined;
  }

  async #judge(looked: ReadonlyMap<string, readonly PartitionLeaf[]>): Promise<PartitionFinding[]> {
    const findings: PartitionFinding[] = [];
    for (const [sourceTable, current] of looked) {
      const recorded = this.#recorded.get(sourceTable);
      if (!recorded) continue;
      const explained = new Set(this.#truncates.get(sourceTable) ?? []);
      const { changes, added } = comparedLeaves(recorded, current, explained);
      for (const leaf of added) {
        if (await this.#options.source.rowsBeforeAttach(leaf)) {
          changes.push({ kind: 'attached', leaf: formatTableName(leaf.name) });
        }
      }
      const leaves = current.map(recordedLeaf);
      if (changes.length > 0) findings.push({ sourceTable, changes, leaves });
      else if (!sameLeaves(recorded, leaves)) await this.accept(sourceTable, leaves);
    }
    return findings;
  }
}

function sameLeaves(a: readonly RecordedLeaf[], b: readonly RecordedLeaf[]): boolean {
  return (
    a.length === b.length &&
    a.every((leaf, index) => leaf.oid === b[index]?.oid && leaf.fileNode === b[index]?.fileNode)
  );
}

/**
 * Records the leaves of those of `tables` that are partitioned, as a load of
 * them from nothing begins (before it reads: a change after this is found
 * by the next look, one before it is in what the load reads).
 */
export async function recordLoadedPartitions(
  context: MirrorContext,
  tables: readonly DestinationTable[],
): Promise<void> {
  if (tables.length === 0) return;
  const { byTable } = await watched(context, 'source: look up the partitions of the tables to load', () =>
    context.source.partitionLeaves(tables.map((table) => table.source)),
  );
  for (const [sourceTable, leaves] of byTable) {
    await context.catalog.recordPartitionLeaves(context.spec.name, sourceTable, leaves.map(recordedLeaf));
  }
}

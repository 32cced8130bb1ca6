// What the applier does with Relation messages: follows each relation's shape
// (relations.ts), decides at their first change what the changes of
// relations not mapped by name are (unmapped-relations.ts), and carries a
// mapped table's schema changes to the destination. Columns added at the
// source are added at the destination (their type names looked up at the
// source), after every batch written under the old shape is durable and with
// no batch in flight; dropped and retyped columns are said in the mirror's log
// and left as they are at the destination (docs/engine.md, "Schema changes").
import type { LogLevel } from '../catalog/catalog.ts';
import type { RelationMessage } from '../connectors/changes.ts';
import type { Destination } from '../connectors/destination.ts';
import type { DestinationTable, SourceColumn, TableSwap } from '../connectors/records.ts';
import { EngineError } from '../errors.ts';
import { formatTableName, type TableMapping, type TableName } from '../resources/mirror.ts';
import { RelationTracker, type SchemaChange, type TrackedRelation } from './relations.ts';
import { followedPartitionTruncated, UnmappedRelations } from './unmapped-relations.ts';

export interface SchemaEvolutionOptions {
  readonly destination: Pick<Destination, 'addColumns'>;
  readonly tableMappings: readonly TableMapping[];
  readonly tables: readonly DestinationTable[];
  /** Type names of columns a relation message adds (Source.typeNames). */
  readonly typeNames: (
    columns: readonly { readonly typeOid: number; readonly typeModifier: number }[],
  ) => Promise<string[]>;
  /** The partitioned tables a relation is a partition of, parent first (Source.partitionAncestors). */
  readonly partitionAncestors: (relationId: number) => Promise<readonly TableName[]>;
  /** The publication the stream reads, and whether the mirror created it (for what unmapped changes mean). */
  readonly publication: { readonly name: string; readonly createdByMirror: boolean };
  /** A mirror log line (no row values). */
  readonly log: (level: LogLevel, message: string) => Promise<void>;
  /**
   * Called before a table's shape changes: resolves once the destination holds
   * (or is writing) every change buffered for `table` under the old shape, and,
   * when columns are added, once no batch is in flight (BatchWriter.beforeSchemaChange).
   */
  readonly beforeChange: (table: DestinationTable, addsColumns: boolean) => Promise<void>;
  /** Source tables stopped on a fault of their own: their destination is not changed (ChangeApplierOptions). */
  readonly stoppedTables?: ReadonlySet<string> | undefined;
  /** Tables being resynced online (ChangeApplierOptions): their shadow was shaped before the change. */
  readonly resyncShadows?: ReadonlyMap<string, TableSwap> | undefined;
}

export class SchemaEvolution {
  readonly #options: SchemaEvolutionOptions;
  /** The mapped relations as the last Relation message of each shaped them; read for every change. */
  readonly relations: RelationTracker;
  readonly #unmapped: UnmappedRelations;

  constructor(options: SchemaEvolutionOptions) {
    this.#options = options;
    this.relations = new RelationTracker(options.tableMappings, options.tables);
    this.#unmapped = new UnmappedRelations({
      relations: this.relations,
      partitionAncestors: options.partitionAncestors,
      log: options.log,
      publication: options.publication,
    });
  }

  /**
   * A Relation message. Returns a promise when it changes a mapped table's
   * schema: the caller waits for it before the next message.
   */
  observe(relation: RelationMessage): Promise<void> | undefined {
    if (!this.relations.maps(relation)) {
      this.#unmapped.announce(relation);
      return undefined;
    }
    const change = this.relations.observe(relation);
    return change ? this.#apply(change, relation) : undefined;
  }

  /**
   * Whether a change to the relation must wait for `resolve`: it is not mapped
   * by name and not decided yet. Cheap: asked for every change.
   */
  needsResolving(relationId: number): boolean {
    return this.#unmapped.needsResolving(relationId);
  }

  /**
   * Decides, at their first change, what the changes of these relations are:
   * a partition of a mapped table is followed as that table (its schema
   * change applied), any other relation's changes are skipped.
   */
  async resolve(relationIds: readonly number[]): Promise<void> {
    for (const relationId of relationIds) {
      if (!this.#unmapped.needsResolving(relationId)) continue;
      const resolution = await this.#unmapped.resolve(relationId);
      if (resolution.followed && resolution.schemaChange) {
        await this.#apply(resolution.schemaChange, resolution.relation);
      }
    }
  }

  /**
   * A truncate of a relation followed as a partition of a mapped table cannot
   * be applied (the destination cannot tell the partition's rows apart):
   * throws with the fix. Any other truncate passes.
   */
  checkTruncate(relationId: number, tracked: TrackedRelation): void {
    if (!this.relations.isFollowedPartition(relationId)) return;
    throw followedPartitionTruncated(
      this.#unmapped.nameOf(relationId),
      tracked.sourceName,
      this.#options.publication.name,
    );
  }

  async #apply(change: SchemaChange, relation: RelationMessage): Promise<void> {
    const { log, destination } = this.#options;
    const tableName = formatTableName(change.table.source);
    if (this.#options.stoppedTables?.has(tableName)) {
      // Nothing of a stopped table is written; the load that brings it back
      // creates its destination columns from the source's shape then.
      if (change.added.length > 0) this.relations.extend(change.table, [], relation);
      await log(
        'INFO',
        `the schema of ${tableName} changed while it is stopped; its load back follows the change`,
      );
      return;
    }
    if (change.added.length > 0 && this.#options.resyncShadows?.has(tableName)) {
      // The shadow has the old columns: the table stops (errored), and a resync loads it again.
      throw new EngineError(
        'schema_mismatch',
        `columns were added to ${tableName} at the source while it was being resynced`,
        { table: tableName },
      );
    }
    await this.#options.beforeChange(change.table, change.added.length > 0);
    if (change.added.length > 0) {
      const typeNames = await this.#options.typeNames(change.added);
      const columns: SourceColumn[] = change.added.map((added, index) => ({
        ...added,
        typeName: typeNames[index] ?? 'text',
        notNull: false,
      }));
      await destination.addColumns(change.table, columns);
      this.relations.extend(change.table, columns, relation);
      await log('INFO', `added column(s) ${columns.map((c) => c.name).join(', ')} to ${tableName}`);
    }
    if (change.dropped.length > 0) {
      await log(
        'WARN',
        `column(s) ${change.dropped.join(', ')} of ${tableName} were dropped at the source; the destination keeps them and new rows get null`,
      );
    }
    if (change.retyped.length > 0) {
      await log(
        'WARN',
        `column(s) ${change.retyped.join(', ')} of ${tableName} changed type at the source; the destination column type is unchanged`,
      );
    }
  }
}

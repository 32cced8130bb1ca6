// What the mirror does with a change to a relation it does not map by name.
// The rule (docs/engine.md, "Changes of tables the mirror does not map"): a
// partition of a mapped table is followed as that table, since its changes
// belong to it (they arrive under the partition's name when the publication
// does not publish via the root, as one a mirror created before it did);
// anything else is a table the publication holds beside the mirror's (a
// user-named publication of more tables, or a table an edit removed, whose
// older changes are still in the slot), and its changes are skipped, said once
// per relation in the mirror's logs. No change is dropped without a word.
import type { LogLevel } from '../catalog/catalog.ts';
import type { RelationMessage } from '../connectors/changes.ts';
import { EngineError } from '../errors.ts';
import { formatTableName, type TableName } from '../resources/mirror.ts';
import type { RelationTracker } from './relations.ts';

export interface UnmappedRelationsOptions {
  readonly relations: RelationTracker;
  /** The partitioned tables a relation is a partition of, parent first (Source.partitionAncestors). */
  readonly partitionAncestors: (relationId: number) => Promise<readonly TableName[]>;
  /** A mirror log line (no row values). */
  readonly log: (level: LogLevel, message: string) => Promise<void>;
  /** The publication the mirror reads, and whether the mirror created it. */
  readonly publication: { readonly name: string; readonly createdByMirror: boolean };
}

/** The outcome of resolving a relation: followed as a mapped table (its shape settled at its next applied change), or skipped. */
export type Resolution =
  | { readonly followed: true; readonly relation: RelationMessage }
  | { readonly followed: false };

export class UnmappedRelations {
  readonly #options: UnmappedRelationsOptions;
  /** The last Relation message of each relation not mapped by name, until it is resolved. */
  readonly #announced = new Map<number, RelationMessage>();
  /** Relations whose changes are skipped (said once in the logs). */
  readonly #skipped = new Set<number>();
  /** The names of partitions followed as a mapped table, for messages. */
  readonly #followedNames = new Map<number, string>();

  constructor(options: UnmappedRelationsOptions) {
    this.#options = options;
  }

  /** Keeps a Relation message the tracker does not map, for when a change to it arrives. */
  announce(relation: RelationMessage): void {
    this.#announced.set(relation.relationId, relation);
  }

  /**
   * Whether a change to this relation needs `resolve` first: it is neither
   * followed by the tracker nor known to be skipped. Cheap: asked for every
   * change to an untracked relation.
   */
  needsResolving(relationId: number): boolean {
    return !this.#skipped.has(relationId) && this.#options.relations.tableOf(relationId) === undefined;
  }

  /** A followed partition's name as `schema.table` (its id when unknown). */
  nameOf(relationId: number): string {
    return this.#followedNames.get(relationId) ?? `relation ${relationId}`;
  }

  /**
   * Decides a relation's changes at its first change: followed as the mapped
   * table it is a partition of, or skipped. One source lookup per relation.
   */
  async resolve(relationId: number): Promise<Resolution> {
    const relation = this.#announced.get(relationId);
    if (!relation) {
      // pgoutput sends a relation's Relation message before its first change in a session.
      throw new EngineError(
        'decode',
        `a change arrived for relation ${relationId} before its Relation message`,
      );
    }
    const shown = formatTableName({ schema: relation.schema, table: relation.name });
    const namesake = this.#options.relations.namesakeOf(relation);
    const ancestors = await this.#options.partitionAncestors(relationId);
    const { relations, log, publication } = this.#options;
    const mapped = ancestors.find((ancestor) => relations.mapsSource(ancestor));
    this.#announced.delete(relationId);
    if (mapped) {
      relations.followAsPartition(relation, mapped);
      this.#followedNames.set(relationId, shown);
      await log(
        'INFO',
        `changes of partition ${shown} arrive under its own name (publication ${publication.name} does not publish via the partition root): they are applied as ${formatTableName(mapped)}`,
      );
      return { followed: true, relation };
    }
    this.#skipped.add(relationId);
    if (namesake) {
      // The followed table was renamed away, or dropped (its table stops
      // then, source-tables-watch.ts, and loads this one when it rejoins).
      await log(
        'INFO',
        `changes of ${shown} are skipped: it is another table than the one the mirror follows as ${shown} (renamed or dropped since, and a table made under its name)`,
      );
      return { followed: false };
    }
    await log(
      'INFO',
      publication.createdByMirror
        ? `changes of ${shown} are skipped: it is not among the mirror's tables (removed by an edit, and in publication ${publication.name} when they were made)`
        : `changes of ${shown} are skipped: publication ${publication.name} publishes it, but the mirror does not map it`,
    );
    return { followed: false };
  }
}

/**
 * A partition followed under its own name was truncated: the destination
 * holds the partitioned table's rows in one table and cannot tell which were
 * the partition's, so the mirror stops with the fix rather than truncate all
 * of them or none.
 */
export function followedPartitionTruncated(partition: string, mapped: string, publication: string) {
  return new EngineError(
    'source_setup',
    `partition ${partition} of ${mapped} was truncated while publication ${publication} published it under its own name, and the destination cannot tell its rows from the rest of ${mapped}'s: ALTER PUBLICATION "${publication.replaceAll('"', '""')}" SET (publish_via_partition_root = true), then resync ${mapped}`,
  );
}

// The mirror specification the engine runs. Defaults are the interface's.
import { z } from 'zod';
import { enginePodSettingsSchema } from './engine-pod.ts';
import { resourceNameSchema } from './names.ts';

export const tableNameSchema = z.object({
  schema: z.string().min(1).max(63),
  table: z.string().min(1).max(63),
});

export const tableMappingSchema = z.object({
  source: tableNameSchema,
  destination: tableNameSchema,
  exclude: z.array(z.string().min(1)).default([]),
  /** Ordering-key ranks for analytics destinations; ignored elsewhere. */
  columns: z
    .array(z.object({ sourceName: z.string().min(1), ordering: z.number().int().optional() }))
    .default([]),
});

/** The spec's fields without cross-field rules (for deriving other schemas). */
export const mirrorSpecFields = z.object({
  name: resourceNameSchema,
  sourcePeer: z.string().min(1),
  destinationPeer: z.string().min(1),
  tableMappings: z.array(tableMappingSchema).min(1),
  maxBatchSize: z.number().int().positive().default(1_000_000),
  idleTimeoutSeconds: z.number().int().positive().default(60),
  /**
   * Beyond the interface: a batch also closes as soon as the replication stream
   * has nothing more buffered at a transaction boundary, so a change is written
   * within milliseconds of its commit instead of up to idleTimeoutSeconds later.
   * Under load batches still grow by themselves (what arrives while one is
   * written forms the next).
   */
  streaming: z.boolean().default(false),
  publicationName: z.string().min(1).max(63).optional(),
  // PostgreSQL's rule for slot names; anything else fails only later, at setup.
  replicationSlotName: z
    .string()
    .regex(/^[a-z0-9_]{1,63}$/, 'a replication slot name is 1-63 lower-case letters, digits and _')
    .optional(),
  /**
   * Lets the mirror read and advance a slot (and use a publication of its
   * default name) that it did not create; it still never drops them.
   */
  adoptExistingSlot: z.boolean().default(false),
  /**
   * PostgreSQL 17+: the mirror's slot is a failover slot, which standbys that
   * synchronize slots keep, so the mirror survives a failover (docs/postgres-versions.md).
   */
  failoverSlot: z.boolean().default(false),
  doInitialSnapshot: z.boolean(),
  snapshotNumRowsPerPartition: z.number().int().positive().default(1_000_000),
  snapshotMaxParallelWorkers: z.number().int().positive().default(4),
  snapshotNumTablesInParallel: z.number().int().positive().default(1),
  resync: z.boolean().default(false),
  initialSnapshotOnly: z.boolean().default(false),
  softDeleteColName: z.string().min(1).max(63).optional(),
  syncedAtColName: z.string().min(1).max(63).optional(),
  script: z.string().optional(),
  system: z.enum(['Q', 'PG']).default('Q'),
  /** Engine pod settings in cluster mode (resources, scheduling, labels): see engine-pod.ts. */
  engine: enginePodSettingsSchema.optional(),
});

export const initialSnapshotOnlyMessage = 'initialSnapshotOnly needs doInitialSnapshot';

export const mirrorSpecSchema = mirrorSpecFields.refine(
  (spec) => !spec.initialSnapshotOnly || spec.doInitialSnapshot,
  { message: initialSnapshotOnlyMessage, path: ['initialSnapshotOnly'] },
);

export type TableName = z.infer<typeof tableNameSchema>;
export type TableMapping = z.infer<typeof tableMappingSchema>;
export type MirrorSpec = z.infer<typeof mirrorSpecSchema>;
/** A spec as written by users: defaulted fields may be left out. */
export type MirrorSpecInput = z.input<typeof mirrorSpecSchema>;

/** Parses `schema.table` (or a bare `table`, meaning `public`). Quoted parts keep dots. */
export function parseTableIdentifier(identifier: string): TableName {
  const parts: string[] = [];
  let current = '';
  let quoted = false;
  for (let i = 0; i < identifier.length; i++) {
    const char = identifier[i];
    if (char === '"') {
      if (quoted && identifier[i + 1] === '"') {
        current += '"';
        i++;
      } else quoted = !quoted;
    } else if (char === '.' && !quoted) {
      parts.push(current);
      current = '';
    } else current += char;
  }
  parts.push(current);
  if (quoted || parts.length > 2 || parts.some((part) => part.length === 0)) {
    throw new Error(`invalid table identifier: expected schema.table`);
  }
  const [first, second] = parts;
  return second === undefined
    ? { schema: 'public', table: first ?? '' }
    : { schema: first ?? '', table: second };
}

export function formatTableName(name: TableName): string {
  return `${name.schema}.${name.table}`;
}

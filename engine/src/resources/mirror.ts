// The mirror specification the engine runs. Defaults are the interface's. The
// descriptions are the CRD's (`kubectl explain mirror.spec`) and the OpenAPI
// document's: `make crds` emits them.
import { z } from 'zod';
import { enginePodSettingsSchema } from './engine-pod.ts';
import { resourceNameSchema } from './names.ts';

export const tableNameSchema = z.object({
  schema: z.string().min(1).max(63).describe('The schema name, as PostgreSQL stores it (case-sensitive).'),
  table: z.string().min(1).max(63).describe('The table name, as PostgreSQL stores it (case-sensitive).'),
});

/**
 * Where a row filter's text could end: a `;`, a comment, or a closing
 * parenthesis without its opening one, outside string literals and quoted
 * identifiers. The filter is SQL by design and always read inside
 * `WHERE (<filter>)`; with its parentheses balanced and nothing of this, it
 * can only be (part of) one expression there, never a second statement or a
 * clause of its own.
 */
export function rowFilterEscape(filter: string): string | undefined {
  let depth = 0;
  for (let i = 0; i < filter.length; i++) {
    const char = filter[i];
    const next = filter[i + 1];
    if (char === "'" || char === '"') {
      // A literal ('…', E'…', U&'…') or a quoted identifier, its quote doubled inside.
      const escapes = char === "'" && /[eE]/.test(filter[i - 1] ?? '') && !/\w/.test(filter[i - 2] ?? '');
      let j = i + 1;
      for (; j < filter.length; j++) {
        if (filter[j] === '\\' && char === "'") {
          // Read as an escape or not by standard_conforming_strings: only E'…' is unambiguous.
          if (!escapes) return "a string literal holds a backslash: write it as E'…'";
          j++;
        } else if (filter[j] === char) {
          if (filter[j + 1] === char) j++;
          else break;
        }
      }
      if (j >= filter.length) return 'a quote is not closed';
      i = j;
    } else if (
      char === '$' &&
      /[A-Za-z_$]/.test(filter.slice(i + 1, i + 2)) &&
      !/\w/.test(filter[i - 1] ?? '')
    ) {
      // A dollar-quoted literal ($tag$…$tag$), or a parameter-like token left to the server.
      const tag = /^\$[A-Za-z_]?\w*\$/.exec(filter.slice(i))?.[0];
      if (!tag) continue;
      const end = filter.indexOf(tag, i + tag.length);
      if (end < 0) return 'a dollar quote is not closed';
      i = end + tag.length - 1;
    } else if (char === ';') {
      return 'it holds a ;';
    } else if ((char === '-' && next === '-') || (char === '/' && next === '*')) {
      return 'it holds a comment';
    } else if (char === '(') {
      depth++;
    } else if (char === ')') {
      depth--;
      if (depth < 0) return 'a ) closes what it did not open';
    }
  }
  return depth === 0 ? undefined : 'a ( is not closed';
}

export const rowFilterSchema = z
  .string()
  .trim()
  .min(1)
  .max(4096)
  .superRefine((filter, context) => {
    const escaped = rowFilterEscape(filter);
    if (escaped)
      context.addIssue({
        code: 'custom',
        message: `a row filter is one SQL expression, and this one is not: ${escaped}`,
      });
  });

export const tableMappingSchema = z.object({
  source: tableNameSchema.describe('The source table.'),
  destination: tableNameSchema.describe(
    'The destination table (for a Kafka destination, the default topic: docs/kafka.md).',
  ),
  exclude: z
    .array(z.string().min(1))
    .default([])
    .describe(
      'Source columns left out of the destination table (PostgreSQL 15+: left out of the publication too).',
    ),
  rowFilter: rowFilterSchema
    .optional()
    .describe(
      'Beyond the interface: a SQL predicate over the source columns; only rows for which it is true are ' +
        "replicated (PostgreSQL 15+: the publication's row filter; docs/engine.md, Row filters).",
    ),
  columns: z
    .array(
      z.object({
        sourceName: z.string().min(1).describe('A source column.'),
        ordering: z
          .number()
          .int()
          .optional()
          .describe(
            'Its rank in the sorting key: ranked columns come first, then the rest of the source key.',
          ),
      }),
    )
    .default([])
    .describe('Ordering-key ranks for analytics destinations; ignored elsewhere.'),
});

/** What a change of a source table's shape does (MirrorSpec.schemaChanges). */
export const schemaChangePolicies = ['apply', 'hold', 'ignore'] as const;
export type SchemaChangePolicy = (typeof schemaChangePolicies)[number];

/** The spec's fields without cross-field rules (for deriving other schemas). */
export const mirrorSpecFields = z.object({
  name: resourceNameSchema.describe('The mirror name.'),
  sourcePeer: z.string().min(1).describe('The relational Peer the mirror reads from (immutable).'),
  destinationPeer: z.string().min(1).describe('The Peer the mirror writes to (immutable).'),
  tableMappings: z
    .array(tableMappingSchema)
    .min(1)
    .describe('The tables replicated, each source table in one mapping only.'),
  maxBatchSize: z
    .number()
    .int()
    .positive()
    .max(100_000_000)
    .default(1_000_000)
    .describe('The most changes a batch holds before it is written.'),
  idleTimeoutSeconds: z
    .number()
    .int()
    .positive()
    .max(86_400)
    .default(60)
    .describe('A batch is written at the latest this many seconds after its first change.'),
  streaming: z
    .boolean()
    .default(false)
    .describe(
      // Beyond the interface: under load batches still grow by themselves (what
      // arrives while one is written forms the next).
      'A batch also closes as soon as the replication stream has nothing more buffered at a transaction ' +
        'boundary, so a change is written within milliseconds of its commit instead of up to ' +
        'idleTimeoutSeconds later.',
    ),
  publicationName: z
    .string()
    .min(1)
    .max(63)
    .optional()
    .describe(
      'An existing publication holding every mapped table; default: one the mirror creates (immutable).',
    ),
  // PostgreSQL's rule for slot names; anything else fails only later, at setup.
  replicationSlotName: z
    .string()
    .regex(/^[a-z0-9_]{1,63}$/, 'a replication slot name is 1-63 lower-case letters, digits and _')
    .optional()
    .describe('The replication slot name; default tributary_<mirror>_<hash> (immutable).'),
  adoptExistingSlot: z
    .boolean()
    .default(false)
    .describe(
      'Lets the mirror read and advance a slot (and use a publication of its default name) that it did ' +
        'not create; it still never drops them.',
    ),
  failoverSlot: z
    .boolean()
    .default(false)
    .describe(
      'PostgreSQL 17+: the slot is a failover slot, which standbys that synchronize slots keep, so the ' +
        'mirror survives a failover.',
    ),
  heartbeatIntervalSeconds: z
    .number()
    .int()
    .min(0)
    .max(86_400)
    .default(30)
    .describe(
      'While streaming, a heartbeat (a logical decoding message in a transaction of its own) is written ' +
        'to the source database this often, so the slot of an idle database follows a busy server; 0 ' +
        'writes none.',
    ),
  maxRetainedWalBytes: z
    .number()
    .int()
    .min(1_048_576)
    .max(Number.MAX_SAFE_INTEGER)
    .optional()
    .describe(
      "A limit on the WAL the source keeps for the mirror's slot, in bytes (at least 1 MiB): past it the " +
        'slot is unhealthy (RetainedWalOverLimit) and retainedWalLimitAction is taken. Default: no limit.',
    ),
  retainedWalLimitAction: z
    .enum(['Alert', 'DropSlot'])
    .default('Alert')
    .describe(
      'What passing maxRetainedWalBytes does: Alert (the SlotHealthy condition, its alert and a ' +
        'notification) or DropSlot (also, while the mirror is paused or failed, its slot is dropped and ' +
        'its tables are loaded again when it runs; needs doInitialSnapshot and a slot the mirror created).',
    ),
  doInitialSnapshot: z.boolean().describe('Copy the tables as they are before streaming their changes.'),
  snapshotNumRowsPerPartition: z
    .number()
    .int()
    .positive()
    .default(1_000_000)
    .describe('The initial load splits each table into ranges of about this many rows.'),
  snapshotMaxParallelWorkers: z
    .number()
    .int()
    .positive()
    .max(64)
    .default(4)
    .describe('Ranges of one table copied at a time during the initial load.'),
  snapshotNumTablesInParallel: z
    .number()
    .int()
    .positive()
    .max(64)
    .default(1)
    .describe('Tables copied at a time during the initial load.'),
  resync: z
    .boolean()
    .default(false)
    .describe('Lets the initial load empty destination tables that hold rows this mirror did not write.'),
  initialSnapshotOnly: z
    .boolean()
    .default(false)
    .describe('Copy the tables once and stop, without streaming changes (needs doInitialSnapshot).'),
  resyncTables: z
    .record(z.string().min(1).max(300), z.string().min(1).max(100))
    .default({})
    .describe(
      'Asks for tables to be loaded again: a mapped source table (schema.table) to a token of your choice; ' +
        'a new token asks again. Today a table stopped on a fault of its own (errored) is loaded back.',
    ),
  softDeleteColName: z
    .string()
    .min(1)
    .max(63)
    .optional()
    .describe('A boolean column set on deleted rows, which then stay; without it deleted rows go.'),
  syncedAtColName: z
    .string()
    .min(1)
    .max(63)
    .optional()
    .describe('A column holding the time each row was written at the destination.'),
  script: z.string().optional().describe('The name of a Script that transforms each record.'),
  schemaChanges: z
    .enum(schemaChangePolicies)
    .default('apply')
    .describe(
      'What a change of the shape of a source table does (docs/engine.md, Schema changes): apply makes the ' +
        'destination follow (columns added, dropped, renamed, widened); hold stops the table until its ' +
        'resync accepts the change; ignore only adds columns and leaves the rest as it is. A partitioned ' +
        "table's partitions truncated, detached, dropped or attached with rows count as a change of its " +
        'shape: apply resyncs the table online, hold holds it, ignore keeps the destination as it is.',
    ),
  system: z
    .enum(['Q', 'PG'])
    .default('Q')
    .describe(
      'Type mapping: Q through the typed value model, PG keeping native types for PostgreSQL destinations.',
    ),
  engine: enginePodSettingsSchema
    .optional()
    .describe(
      "Cluster mode: the engine pod's resources, scheduling, labels and temporary storage, over the " +
        "operator's defaults field by field.",
    ),
});

export const initialSnapshotOnlyMessage = 'initialSnapshotOnly needs doInitialSnapshot';

/**
 * What is wrong with a spec's retained WAL limit, if anything: dropping the
 * slot is safe only when the mirror can load its tables again, from a slot of
 * its own. (The CRD holds the same rules: operator/src/crds/definitions.ts.)
 */
export function retainedWalLimitProblem(
  spec: Pick<
    z.output<typeof mirrorSpecFields>,
    'retainedWalLimitAction' | 'maxRetainedWalBytes' | 'doInitialSnapshot' | 'adoptExistingSlot'
  >,
): string | undefined {
  if (spec.retainedWalLimitAction !== 'DropSlot') return undefined;
  if (spec.maxRetainedWalBytes === undefined) return retainedWalLimitMessages.needsLimit;
  if (!spec.doInitialSnapshot) return retainedWalLimitMessages.needsInitialLoad;
  if (spec.adoptExistingSlot) return retainedWalLimitMessages.notAdopted;
  return undefined;
}

export const retainedWalLimitMessages = {
  needsLimit: 'retainedWalLimitAction DropSlot needs maxRetainedWalBytes',
  needsInitialLoad:
    'retainedWalLimitAction DropSlot needs doInitialSnapshot: after the drop the tables are loaded again',
  notAdopted:
    'retainedWalLimitAction DropSlot cannot be used with adoptExistingSlot: a slot the mirror did not create is never dropped',
} as const;

export const mirrorSpecSchema = mirrorSpecFields
  .refine((spec) => !spec.initialSnapshotOnly || spec.doInitialSnapshot, {
    message: initialSnapshotOnlyMessage,
    path: ['initialSnapshotOnly'],
  })
  .superRefine((spec, context) => {
    const walLimitProblem = retainedWalLimitProblem(spec);
    if (walLimitProblem)
      context.addIssue({ code: 'custom', message: walLimitProblem, path: ['retainedWalLimitAction'] });
    const mapped = new Set(spec.tableMappings.map((mapping) => formatTableName(mapping.source)));
    for (const table of Object.keys(spec.resyncTables)) {
      if (!mapped.has(table)) {
        context.addIssue({
          code: 'custom',
          message: `resyncTables names ${table}, which is not a source table of tableMappings`,
          path: ['resyncTables', table],
        });
      }
    }
  });

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

// The custom resources' specs and statuses, derived from the engine's resource
// schemas: one source of truth for the facade, the engine and the CRDs. Secrets
// never appear in a spec: a Peer names a Secret holding them. Every field has a
// description (`kubectl explain mirror.spec`); operator/src/crds/definitions.test.ts
// keeps it so.
import { z } from 'zod';
import {
  allPeerSecretPaths,
  analyticsConfigSchema,
  datawarehouseConfigSchema,
  mirrorDesiredStates,
  mirrorSpecFields,
  peerKinds,
  relationalConfigSchema,
  scriptLanguages,
  sshConfigFields,
  streamConfigFields,
  tableStateNames,
} from '../../../engine/src/index.ts';

export { group, version } from './api-group.ts';

/** An RFC 3339 time as the operator writes it (`Date.toISOString()`), checked by the API server. */
const timestamp = () => z.string().meta({ format: 'date-time' });

// The fields and bounds of metav1.Condition (k8s.io/apimachinery/pkg/apis/meta/v1/types.go).
const conditionSchema = z.object({
  type: z
    .string()
    .min(1)
    .max(316)
    .describe('What the condition reports: Ready (Peer, Mirror), Failed, Progressing, Degraded (Mirror).'),
  status: z.enum(['True', 'False', 'Unknown']).describe('Whether the condition holds.'),
  reason: z.string().describe('Why, in one CamelCase word (for programs).'),
  message: z.string().describe('Why, in a sentence (for people).'),
  lastTransitionTime: timestamp().describe('When status last changed.'),
  observedGeneration: z
    .number()
    .int()
    .optional()
    .describe('The metadata.generation the condition was computed from.'),
});

/**
 * Conditions keyed by type, as Kubernetes declares them: server-side apply then
 * merges each type as one entry (with its own field owner) instead of the
 * whole list, and the API server refuses two conditions of one type.
 */
const conditionsSchema = z
  .array(conditionSchema)
  .meta({
    description: 'The latest observations of the object, one per type.',
    'x-kubernetes-list-type': 'map',
    'x-kubernetes-list-map-keys': ['type'],
  })
  .optional();

/** Non-secret parts of each peer config (secret fields live in the Secret). */
export const peerConfigSpecs = {
  relational: relationalConfigSchema.omit({ password: true, sshConfig: true }).extend({
    sshConfig: sshConfigFields
      .omit({ password: true, privateKey: true })
      .optional()
      .describe('Connect through an SSH tunnel; its password or private key comes from the Secret.'),
  }),
  analytics: analyticsConfigSchema.omit({ password: true, privateKey: true, secretAccessKey: true }),
  datawarehouse: datawarehouseConfigSchema.omit({ privateKey: true, password: true }),
  stream: streamConfigFields.omit({ password: true, privateKey: true }),
} as const;

export const peerCrSpecSchema = z
  .object({
    kind: z
      .enum(peerKinds)
      .describe('The kind of server (immutable); the field of the same name holds its settings.'),
    relational: peerConfigSpecs.relational
      .optional()
      .describe('A PostgreSQL server (a source or a destination).'),
    analytics: peerConfigSpecs.analytics.optional().describe('A ClickHouse server (a destination).'),
    datawarehouse: peerConfigSpecs.datawarehouse.optional().describe('A Snowflake account (a destination).'),
    stream: peerConfigSpecs.stream.optional().describe('A Kafka cluster (a destination).'),
    secretRef: z
      .object({
        name: z.string().min(1).describe("The Secret, in the Peer's namespace."),
        keys: z
          .object(
            Object.fromEntries(
              allPeerSecretPaths.map((path) => [
                path,
                z.string().min(1).optional().describe(`The Secret's key holding ${path}; default: ${path}.`),
              ]),
            ),
          )
          .strict()
          .optional()
          .describe("The Secret's key for a secret field, when it is not the field's dotted path."),
      })
      .describe(
        "A Secret in the same namespace, labelled tributary.dev/peer-secret=true. Only the kind's secret " +
          'fields are read from it, each under its dotted path as key unless `keys` maps it to another key.',
      ),
  })
  .describe('The server and how to reach it; its secret fields come from secretRef.');
export type PeerCrSpec = z.infer<typeof peerCrSpecSchema>;

export const peerCrStatusSchema = z
  .object({
    observedGeneration: z.number().int().optional().describe('The metadata.generation last checked.'),
    version: z.string().optional().describe("The server's version, as the last successful check saw it."),
    lastCheckTime: timestamp().optional().describe('When the peer was last checked.'),
    conditions: conditionsSchema,
  })
  .describe('What the last check of the peer found.');

export const mirrorCrSpecSchema = mirrorSpecFields
  .omit({ name: true })
  .extend({
    state: z
      .enum(mirrorDesiredStates)
      .default('Running')
      .describe('Running, or Paused: the engine stops at its next batch boundary.'),
  })
  .describe('The tables, the peers, and how changes are batched and loaded.');
export type MirrorCrSpec = z.infer<typeof mirrorCrSpecSchema>;

export const mirrorCrStatusSchema = z
  .object({
    observedGeneration: z.number().int().optional().describe('The metadata.generation the status reflects.'),
    phase: z
      .string()
      .optional()
      .describe("The interface's state name, e.g. STATUS_RUNNING (docs/mirror-lifecycle.md)."),
    workflowId: z.string().optional().describe('The id /api/v1 answers for the mirror: <name>-<id>.'),
    errorMessage: z
      .string()
      .optional()
      .describe('Why the mirror failed, with the remedy; or why its pod cannot run.'),
    conditions: conditionsSchema,
    snapshot: z
      .object({
        tables: z
          .array(
            z.object({
              table: z.string().describe('The source table.'),
              partitionsCompleted: z.number().int().describe('Ranges copied.'),
              partitionsTotal: z.number().int().describe('Ranges to copy.'),
              rowsSynced: z.string().describe('Rows copied (a decimal string: it may exceed 2^53).'),
            }),
          )
          .describe('One entry per table.'),
      })
      .optional()
      .describe('Progress of the initial load.'),
    tables: z
      .array(
        z.object({
          sourceTableIdentifier: z.string().describe('The source table, schema.table.'),
          destinationTableIdentifier: z.string().describe('The destination table.'),
          state: z
            .enum(Object.values(tableStateNames))
            .describe("The table's state (docs/mirror-lifecycle.md, Table states)."),
          stateSince: timestamp().describe('When the table entered its state.'),
          rowsApplied: z
            .object({
              inserts: z.string().describe('Inserts applied by CDC (a decimal string).'),
              updates: z.string().describe('Updates applied by CDC (a decimal string).'),
              deletes: z.string().describe('Deletes applied by CDC (a decimal string).'),
            })
            .describe('Row changes CDC applied to the table, by operation.'),
          lastAppliedLsn: z
            .string()
            .describe(
              'Commit LSN of the last transaction applied to the table (decimal); 0 before the first.',
            ),
          lastCommitTime: timestamp().optional().describe("That transaction's commit time."),
          error: z
            .object({
              kind: z.string().describe('The error kind (docs/engine.md).'),
              message: z.string().describe('What went wrong.'),
              remedy: z.string().describe('What to do about it.'),
            })
            .optional()
            .describe('While the table is errored or held: why.'),
          behindLsn: z
            .string()
            .optional()
            .describe('While errored or held: changes after this LSN are not applied to the table.'),
        }),
      )
      .optional()
      .describe('Every table the mirror tracks, removed ones too, by source table.'),
    lastBatchId: z.string().optional().describe('The id of the last batch written.'),
    lastSyncedLsn: z.string().optional().describe('The source LSN the last batch reached.'),
    lastSyncTime: timestamp().optional().describe('When the last batch was written.'),
    lagSeconds: z
      .number()
      .int()
      .optional()
      .describe(
        'Lag in seconds: how long the oldest change received and not yet written to the destination has waited since its commit at the source; 0 when caught up.',
      ),
    rowsSynced: z.string().optional().describe('Rows written since the mirror began (a decimal string).'),
    failedGeneration: z
      .number()
      .int()
      .optional()
      .describe('The metadata.generation the mirror failed at; a retry clears it.'),
  })
  .describe("The mirror's phase, conditions and progress, as the operator last saw them.");
export type MirrorCrStatus = z.infer<typeof mirrorCrStatusSchema>;

/** The API's own bound on a script's source (api-server/src/http/wire.ts). */
export const scriptSourceMaxLength = 1_000_000;

export const scriptCrSpecSchema = z
  .object({
    lang: z.enum(scriptLanguages).describe('The language of source: lua.'),
    source: z
      .string()
      .max(scriptSourceMaxLength)
      .describe(
        'Lua 5.4 defining onRecord(record), called once per change and per row of the initial load (docs/scripts.md).',
      ),
  })
  .describe('The script.');
export const scriptCrStatusSchema = z
  .object({
    id: z.number().int().optional().describe('The id /api/v1/scripts answers for the script.'),
    observedGeneration: z.number().int().optional().describe('The metadata.generation last compiled.'),
    conditions: conditionsSchema,
  })
  .describe('What the operator assigned to the script, and whether its source compiles (Ready).');

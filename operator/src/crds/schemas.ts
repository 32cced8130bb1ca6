// The custom resources' specs and statuses, derived from the engine's resource
// schemas: one source of truth for the facade, the engine and the CRDs. Secrets
// never appear in a spec: a Peer names a Secret holding them.
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
} from '../../../engine/src/index.ts';

export const group = 'tributary.dev';
export const version = 'v1alpha1';

const conditionSchema = z.object({
  type: z.string(),
  status: z.enum(['True', 'False', 'Unknown']),
  reason: z.string(),
  message: z.string(),
  lastTransitionTime: z.string(),
  observedGeneration: z.number().int().optional(),
});

/** Non-secret parts of each peer config (secret fields live in the Secret). */
export const peerConfigSpecs = {
  relational: relationalConfigSchema
    .omit({ password: true, sshConfig: true })
    .extend({ sshConfig: sshConfigFields.omit({ password: true, privateKey: true }).optional() }),
  analytics: analyticsConfigSchema.omit({ password: true, privateKey: true, secretAccessKey: true }),
  datawarehouse: datawarehouseConfigSchema.omit({ privateKey: true, password: true }),
  stream: streamConfigFields.omit({ password: true, privateKey: true }),
} as const;

export const peerCrSpecSchema = z.object({
  kind: z.enum(peerKinds),
  relational: peerConfigSpecs.relational.optional(),
  analytics: peerConfigSpecs.analytics.optional(),
  datawarehouse: peerConfigSpecs.datawarehouse.optional(),
  stream: peerConfigSpecs.stream.optional(),
  /**
   * A Secret in the same namespace, labelled tributary.dev/peer-secret: "true".
   * Only the kind's secret fields are read from it, each under its dotted path
   * as key unless `keys` maps it to another key (e.g. an existing Secret's).
   */
  secretRef: z.object({
    name: z.string().min(1),
    keys: z
      .object(Object.fromEntries(allPeerSecretPaths.map((path) => [path, z.string().min(1).optional()])))
      .strict()
      .optional(),
  }),
});
export type PeerCrSpec = z.infer<typeof peerCrSpecSchema>;

export const peerCrStatusSchema = z.object({
  observedGeneration: z.number().int().optional(),
  version: z.string().optional(),
  lastCheckTime: z.string().optional(),
  conditions: z.array(conditionSchema).optional(),
});

export const mirrorCrSpecSchema = mirrorSpecFields
  .omit({ name: true })
  .extend({ state: z.enum(mirrorDesiredStates).default('Running') });
export type MirrorCrSpec = z.infer<typeof mirrorCrSpecSchema>;

export const mirrorCrStatusSchema = z.object({
  observedGeneration: z.number().int().optional(),
  /** The interface's state name, e.g. STATUS_RUNNING. */
  phase: z.string().optional(),
  workflowId: z.string().optional(),
  errorMessage: z.string().optional(),
  conditions: z.array(conditionSchema).optional(),
  snapshot: z
    .object({
      tables: z.array(
        z.object({
          table: z.string(),
          partitionsCompleted: z.number().int(),
          partitionsTotal: z.number().int(),
          rowsSynced: z.string(),
        }),
      ),
    })
    .optional(),
  lastBatchId: z.string().optional(),
  lastSyncedLsn: z.string().optional(),
  lastSyncTime: z.string().optional(),
  /** Seconds since the last batch was synced. */
  lagSeconds: z.number().int().optional(),
  rowsSynced: z.string().optional(),
  failedGeneration: z.number().int().optional(),
});

export const scriptCrSpecSchema = z.object({ lang: z.enum(scriptLanguages), source: z.string() });
export const scriptCrStatusSchema = z.object({ id: z.number().int().optional() });

// How an engine pod is scheduled and sized (cluster mode): the operator's
// defaults come from the chart's values, a Mirror's `spec.engine` overrides them
// field by field. Standalone mode runs engines in-process and ignores it.
import { z } from 'zod';

const stringMap = z.record(z.string(), z.string());
/** Kubernetes quantities as strings ("500m", "1Gi"), the form kubectl prints. */
const quantities = z.record(
  z.string(),
  z.string().regex(/^[0-9.]+([eE][0-9]+|[a-zA-Z]{0,2})$/, 'a quantity such as 500m or 1Gi'),
);

export const tolerationSchema = z.object({
  key: z.string().optional(),
  operator: z.enum(['Exists', 'Equal']).optional(),
  value: z.string().optional(),
  effect: z.enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute']).optional(),
  tolerationSeconds: z.number().int().optional(),
});

export const enginePodSettingsSchema = z.object({
  resources: z.object({ requests: quantities.optional(), limits: quantities.optional() }).optional(),
  nodeSelector: stringMap.optional(),
  tolerations: z.array(tolerationSchema).optional(),
  /** A Kubernetes `Affinity` object, passed through as written (the API server checks it). */
  affinity: z
    .record(z.string(), z.unknown())
    .meta({ 'x-kubernetes-preserve-unknown-fields': true })
    .optional(),
  priorityClassName: z.string().min(1).optional(),
  imagePullSecrets: z.array(z.object({ name: z.string().min(1) })).optional(),
  /** Extra labels and annotations of the engine pod (the operator's own keys win). */
  labels: stringMap.optional(),
  annotations: stringMap.optional(),
});
export type EnginePodSettings = z.infer<typeof enginePodSettingsSchema>;

/** The Mirror's settings over the operator's: each field replaces; labels and annotations merge. */
export function mergePodSettings(
  defaults: EnginePodSettings | undefined,
  overrides: EnginePodSettings | undefined,
): EnginePodSettings {
  const merged: EnginePodSettings = { ...defaults, ...overrides };
  const labels = { ...defaults?.labels, ...overrides?.labels };
  const annotations = { ...defaults?.annotations, ...overrides?.annotations };
  return {
    ...merged,
    ...(Object.keys(labels).length > 0 ? { labels } : {}),
    ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
  };
}

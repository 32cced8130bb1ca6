// How an engine pod is scheduled and sized (cluster mode): the operator's
// defaults come from the chart's values, a Mirror's `spec.engine` overrides them
// field by field. Standalone mode runs engines in-process and ignores it.
import { z } from 'zod';

const stringMap = z.record(z.string(), z.string());
/** A Kubernetes quantity as a string ("500m", "1Gi"), the form kubectl prints. */
const quantity = z.string().regex(/^[0-9.]+([eE][0-9]+|[a-zA-Z]{0,2})$/, 'a quantity such as 500m or 1Gi');
const quantities = z.record(z.string(), quantity);

export const tolerationSchema = z.object({
  key: z
    .string()
    .optional()
    .describe('The taint key the toleration matches; empty with Exists: every taint.'),
  operator: z
    .enum(['Exists', 'Equal'])
    .optional()
    .describe('Equal (default) compares value; Exists does not.'),
  value: z.string().optional().describe('The taint value, with operator Equal.'),
  effect: z
    .enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute'])
    .optional()
    .describe('The taint effect matched; empty: every effect.'),
  tolerationSeconds: z
    .number()
    .int()
    .optional()
    .describe('With NoExecute: how long the pod stays on a node after the taint appears.'),
});

export const enginePodSettingsSchema = z.object({
  resources: z
    .object({
      requests: quantities.optional().describe('Requested cpu and memory, e.g. { cpu: 500m, memory: 1Gi }.'),
      limits: quantities
        .optional()
        .describe("Limits; the engine's heap is sized to three quarters of the memory limit."),
    })
    .optional()
    .describe("The engine container's resource requests and limits."),
  nodeSelector: stringMap.optional().describe('Node labels the engine pod must be scheduled on.'),
  tolerations: z.array(tolerationSchema).optional().describe('Taints the engine pod tolerates.'),
  affinity: z
    .record(z.string(), z.unknown())
    .meta({
      description: 'A Kubernetes Affinity object, passed through as written (the API server checks it).',
      'x-kubernetes-preserve-unknown-fields': true,
    })
    .optional(),
  priorityClassName: z.string().min(1).optional().describe('The PriorityClass of the engine pod.'),
  imagePullSecrets: z
    .array(z.object({ name: z.string().min(1).describe('A Secret of type kubernetes.io/dockerconfigjson.') }))
    .optional()
    .describe("Registry Secrets for the engine's image."),
  labels: stringMap.optional().describe("Extra labels of the engine pod (the operator's own keys win)."),
  annotations: stringMap
    .optional()
    .describe("Extra annotations of the engine pod (the operator's own keys win)."),
  temporaryStorage: z
    .object({
      sizeLimit: quantity.optional().describe('The most the temporary volume may hold (default 1Gi).'),
      medium: z
        .enum(['Memory'])
        .optional()
        .describe(
          "Memory: keep it in memory, counted against the pod's memory limit; default: the node's disk.",
        ),
    })
    .optional()
    .describe(
      "The engine's temporary files (a Snowflake destination's batch files) live in an emptyDir at /tmp, " +
        'the one writable place of its read-only root file system.',
    ),
});
export type EnginePodSettings = z.infer<typeof enginePodSettingsSchema>;

/** The temporary volume's bound when neither the chart nor the Mirror sets one. */
export const defaultTemporaryStorageLimit = '1Gi';

/** Quantities written as YAML numbers (`cpu: 1`) made the strings the API prints. */
function stringifyQuantities(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || !('resources' in value)) return value;
  const resources = (value as { resources?: unknown }).resources;
  if (resources === null || typeof resources !== 'object') return value;
  const asStrings = (group: unknown) =>
    group !== null && typeof group === 'object'
      ? Object.fromEntries(
          Object.entries(group).map(([name, quantity]) => [
            name,
            typeof quantity === 'number' ? String(quantity) : quantity,
          ]),
        )
      : group;
  const { requests, limits } = resources as { requests?: unknown; limits?: unknown };
  return {
    ...value,
    resources: {
      ...(requests === undefined ? {} : { requests: asStrings(requests) }),
      ...(limits === undefined ? {} : { limits: asStrings(limits) }),
    },
  };
}

/** The operator's defaults as the chart passes them (its `engine` values, as JSON). */
export const enginePodDefaultsSchema = z.preprocess(stringifyQuantities, enginePodSettingsSchema);

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

const binaryUnits: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40 };
const decimalUnits: Record<string, number> = { '': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };

/** Bytes of a memory quantity ("1Gi", "512Mi", "2G", "1073741824"); undefined when it is not one. */
export function memoryBytes(quantity: string): number | undefined {
  const match = /^([0-9.]+)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(quantity);
  if (!match?.[1]) return undefined;
  const unit = match[2] ?? '';
  const factor = binaryUnits[unit] ?? decimalUnits[unit];
  const bytes = Number(match[1]) * (factor ?? Number.NaN);
  return Number.isFinite(bytes) ? bytes : undefined;
}

/** V8's old-space limit for an engine with this memory limit: three quarters of it (buffers and code need the rest). */
export function engineHeapMegabytes(memoryLimit: string | undefined, fallback = 768): number {
  const bytes = memoryLimit === undefined ? undefined : memoryBytes(memoryLimit);
  if (bytes === undefined) return fallback;
  return Math.max(64, Math.floor((bytes * 0.75) / 2 ** 20));
}

// How many of a mirror's log entries the catalog keeps, and for how long.
// Identical consecutive entries are folded into one (a count and the time of
// the last), so a fault that repeats costs one entry; these bounds keep the
// rest from growing without end (a catalog database, standalone mode's data
// directory). Read once at start-up from the environment, through this schema.
import { z } from 'zod';

export const logRetentionDefaults = { maxEntries: 10_000, maxAgeDays: 30 } as const;

export const logRetentionSchema = z.object({
  /** Per mirror name, earlier incarnations included: the oldest go first. */
  maxEntries: z.coerce.number().int().min(10).default(logRetentionDefaults.maxEntries),
  /** Entries whose last write is older go; 0 keeps entries of any age. */
  maxAgeDays: z.coerce.number().min(0).default(logRetentionDefaults.maxAgeDays),
});

export type LogRetention = Readonly<z.infer<typeof logRetentionSchema>>;

/** The variables that set it, for usage texts and docs. */
export const logRetentionVariables = {
  maxEntries: 'TRIBUTARY_MIRROR_LOG_MAX_ENTRIES',
  maxAgeDays: 'TRIBUTARY_MIRROR_LOG_MAX_AGE_DAYS',
} as const;

/** What a role's config schema reads for `logRetentionSchema` (unset and empty mean the default). */
export function logRetentionInput(env: NodeJS.ProcessEnv): Record<keyof LogRetention, string | undefined> {
  return {
    maxEntries: env[logRetentionVariables.maxEntries] || undefined,
    maxAgeDays: env[logRetentionVariables.maxAgeDays] || undefined,
  };
}

/** Parses the retention from the environment; throws an error naming the bad variable. */
export function logRetentionFromEnvironment(env: NodeJS.ProcessEnv): LogRetention {
  const parsed = logRetentionSchema.safeParse(logRetentionInput(env));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const variable = logRetentionVariables[issue?.path[0] as keyof typeof logRetentionVariables];
    throw new Error(`${variable}: ${issue?.message ?? 'invalid'}`);
  }
  return Object.freeze(parsed.data);
}

// How many audit entries the catalog keeps, and for how long: the trail of
// state-changing API requests (Catalog.appendAudit) would otherwise grow
// without end. The bounds are the writer's, the process that serves the API
// (standalone, or the api-server), read once at start-up from the environment.
import { z } from 'zod';

export const auditRetentionDefaults = { maxEntries: 100_000, maxAgeDays: 365 } as const;

export const auditRetentionSchema = z.object({
  /** In all: the oldest go first. */
  maxEntries: z.coerce.number().int().min(100).default(auditRetentionDefaults.maxEntries),
  /** Entries older go; 0 keeps entries of any age. */
  maxAgeDays: z.coerce.number().min(0).default(auditRetentionDefaults.maxAgeDays),
});

export type AuditRetention = Readonly<z.infer<typeof auditRetentionSchema>>;

export const auditRetentionVariables = {
  maxEntries: 'TRIBUTARY_AUDIT_MAX_ENTRIES',
  maxAgeDays: 'TRIBUTARY_AUDIT_MAX_AGE_DAYS',
} as const;

/** What a role's config schema reads for `auditRetentionSchema` (unset and empty mean the default). */
export function auditRetentionInput(
  env: NodeJS.ProcessEnv,
): Record<keyof AuditRetention, string | undefined> {
  return {
    maxEntries: env[auditRetentionVariables.maxEntries] || undefined,
    maxAgeDays: env[auditRetentionVariables.maxAgeDays] || undefined,
  };
}

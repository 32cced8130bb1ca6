// A stable fingerprint of a JSON value: objects hashed with sorted keys, so the
// same config always gives the same hash whatever order its fields were built in.
import { createHash } from 'node:crypto';

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value as Record<string, unknown>)
        .filter(([, field]) => field !== undefined)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([key, field]) => [key, canonical(field)]),
    );
  }
  return value;
}

/** 16 hex digits of the SHA-256 of the value's canonical JSON (bigints as strings). */
export function configHash(value: unknown): string {
  const text = JSON.stringify(canonical(value), (_key, field: unknown) =>
    typeof field === 'bigint' ? field.toString() : field,
  );
  return createHash('sha256').update(text).digest('hex').slice(0, 16);
}

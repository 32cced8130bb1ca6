// A stable fingerprint of a JSON value: objects hashed with sorted keys, so the
// same config always gives the same hash whatever order its fields were built in.
import { createHash, createHmac } from 'node:crypto';

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

/**
 * 16 hex digits of the SHA-256 of the value's canonical JSON (bigints as
 * strings). With `key`, an HMAC: a hash of a config holding passwords that is
 * shown where the passwords are not (a pod template annotation) must not let
 * anyone test guesses against it.
 */
export function configHash(value: unknown, key?: string): string {
  const text = JSON.stringify(canonical(value), (_key, field: unknown) =>
    typeof field === 'bigint' ? field.toString() : field,
  );
  const digest = key === undefined ? createHash('sha256') : createHmac('sha256', key);
  return digest.update(text).digest('hex').slice(0, 16);
}

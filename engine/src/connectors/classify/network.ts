// What every driver's classifier shares: socket error codes, the side a fault
// is on, and the wrapping of a throwable that is not an Error.
import { EngineError, type ErrorKind } from '../../errors.ts';

/** Socket and resolver error codes that mean the server could not be reached. */
export const networkErrorCodes: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'EPIPE',
  'EAI_AGAIN',
]);

/** True when `error`, or an error it wraps in `cause`, carries a socket error code. */
export function hasNetworkCode(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && typeof current === 'object' && current !== null; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && networkErrorCodes.has(code)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * Which end of a mirror a fault is on. A peer check has neither: the peer is
 * not yet a source or a destination.
 */
export type Side = 'source' | 'destination';

/**
 * The side named by the first word of `what` ("source: create publication …",
 * "destination: sync batch 3"), the convention every connector follows.
 */
export function sideOf(what: string): Side | undefined {
  if (what.startsWith('source:')) return 'source';
  if (what.startsWith('destination:')) return 'destination';
  return undefined;
}

/** The kinds that tell the source's fault from the destination's (see errors.ts). */
const sourceKinds: Partial<Record<ErrorKind, ErrorKind>> = {
  auth: 'source_auth',
  permission: 'source_permission',
  schema_mismatch: 'source_schema',
};

/** `kind` as seen on `side`: on the source, a kind whose remedy differs there becomes the source's own. */
export function onSide(kind: ErrorKind, side: Side | undefined): ErrorKind {
  return side === 'source' ? (sourceKinds[kind] ?? kind) : kind;
}

/**
 * A throwable that is not an Error (a string, a plain object) says nothing a
 * classifier can read: it keeps the step's fallback kind and goes to `cause`,
 * never into the message.
 */
export function notAnError(error: unknown, what: string, fallback: ErrorKind): EngineError {
  return new EngineError(fallback, `${what} failed`, { cause: error });
}

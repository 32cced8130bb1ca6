// ssh2 errors of the tunnel to a relational peer. ssh2 tells where a failure
// arose in `level`: `client-authentication` when the server refused every
// method offered, `client-socket` and `client-timeout` before the handshake.
import { EngineError, isEngineError } from '../../errors.ts';
import { notAnError } from './network.ts';

/**
 * `what` names the tunnel, e.g. "ssh tunnel to user@host:22". Every fault is
 * `ssh_tunnel` (the remedy names the peer's ssh_config); the message says which
 * part failed.
 */
export function classifySshError(error: unknown, what: string): EngineError {
  if (isEngineError(error)) return error;
  if (!(error instanceof Error)) return notAnError(error, what, 'ssh_tunnel');
  const level = (error as { level?: unknown }).level;
  const failed = level === 'client-authentication' ? 'authentication failed' : 'could not connect';
  return new EngineError('ssh_tunnel', `${what}: ${failed}`, { cause: error });
}

/** True for an error ssh2 raised (it sets `level` on each). */
export function isSshError(error: unknown): boolean {
  return error instanceof Error && typeof (error as { level?: unknown }).level === 'string';
}

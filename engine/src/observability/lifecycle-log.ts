// One process log line per mirror lifecycle action, so a person reading the
// service log sees what happened to every mirror without the API. Lines carry
// `mirror` and `lifecycle` (the action) and a message naming both; the caller's
// logger must not already bind `mirror` (the reconciler's does not).
import type { Logger } from 'pino';

export const lifecycleActions = [
  'created',
  'paused',
  'resumed',
  'edited',
  'dropped',
  'failed',
  'recovered',
] as const;

export type LifecycleAction = (typeof lifecycleActions)[number];

/** Logs at info; `detail` is a short phrase without secrets or row values. */
export function logLifecycle(logger: Logger, mirror: string, action: LifecycleAction, detail?: string): void {
  logger.info({ mirror, lifecycle: action }, detail ? `mirror ${action}: ${detail}` : `mirror ${action}`);
}

// Keeps one mirror running: reruns the pipeline after failures the policy says
// to retry (with capped exponential backoff), and marks the mirror failed, with
// the remedy, when it says a person must act.
import { setTimeout as delay } from 'node:timers/promises';
import { EngineError, isEngineError } from '../errors.ts';
import { type MirrorContext, mirrorLog } from './context.ts';
import { type RunOutcome, runMirror } from './run-mirror.ts';

export interface SupervisorOptions {
  readonly initialBackoffMs?: number;
  readonly maxBackoffMs?: number;
}

export type SupervisedOutcome = RunOutcome | 'failed';

export async function superviseMirror(
  context: MirrorContext,
  options: SupervisorOptions = {},
): Promise<SupervisedOutcome> {
  const initialBackoffMs = options.initialBackoffMs ?? 1_000;
  const maxBackoffMs = options.maxBackoffMs ?? 60_000;
  let backoffMs = initialBackoffMs;
  for (;;) {
    const startedAt = Date.now();
    try {
      return await runMirror(context);
    } catch (caught) {
      const error = isEngineError(caught)
        ? caught
        : new EngineError('internal', 'unexpected engine failure', { cause: caught });
      const { retry, remedy } = error.policy;
      context.logger.error({ err: error, kind: error.kind }, 'mirror run failed');
      context.metrics?.runFailed(context.spec.name, error.kind, retry === 'timed');
      if (retry !== 'timed') {
        await mirrorLog(context, 'ERROR', `${error.message}. ${remedy}`);
        await context.catalog
          .transition(context.spec.name, 'failed', `${error.message}. ${remedy}`)
          .catch((refused: unknown) => context.logger.warn({ err: refused }, 'could not record the failure'));
        return 'failed';
      }
      // A run that lasted a while before failing starts the backoff over.
      if (Date.now() - startedAt > maxBackoffMs) backoffMs = initialBackoffMs;
      await mirrorLog(
        context,
        'ERROR',
        `${error.message}; retrying in ${Math.round(backoffMs / 1000)}s. ${remedy}`,
      );
      try {
        await delay(backoffMs, undefined, { signal: context.signal });
      } catch {
        return 'stopped';
      }
      backoffMs = Math.min(backoffMs * 2, maxBackoffMs);
    }
  }
}

// Keeps one mirror running: reruns the pipeline after faults that can go away
// by themselves (policy `timed`) with capped exponential backoff and jitter,
// shows the fault while it lasts, and marks the mirror failed, with the remedy,
// when the policy says a person must act.
import { setTimeout as delay } from 'node:timers/promises';
import { movePhase } from '../catalog/phases.ts';
import { classifyError } from '../connectors/classify/index.ts';
import type { EngineError } from '../errors.ts';
import { type MirrorContext, mirrorLog } from './context.ts';
import { defaultStallAfterMs, ProgressWatchdog } from './progress-watchdog.ts';
import { type RunOutcome, runMirror } from './run-mirror.ts';

export interface SupervisorOptions {
  readonly initialBackoffMs?: number;
  readonly maxBackoffMs?: number;
}

export type SupervisedOutcome = RunOutcome | 'failed';

/**
 * Defaults: the first retry after about 0.5 s, doubling up to 4 s. A removed
 * fault is noticed within one wait, so rows flow again within about 4 s plus
 * the time to reconnect; a fault that lasts costs one attempt every few seconds.
 */
export const defaultRetryBackoff = { initialMs: 500, maxMs: 4_000 } as const;

/**
 * The wait before the next attempt: `backoffMs` less up to half of it, drawn at
 * random, so mirrors that failed together (a destination restart) do not
 * retry in step.
 */
export function jitteredDelayMs(backoffMs: number, random: () => number = Math.random): number {
  return Math.round(backoffMs / 2 + (random() * backoffMs) / 2);
}

/** The fault being retried: what is shown, and whether it arose while streaming. */
interface OpenFault {
  readonly message: string;
  readonly attempts: number;
  readonly since: number;
  /** A fault raised while streaming clears only with a durable batch; one before, once streaming resumes. */
  readonly whileStreaming: boolean;
}

export async function superviseMirror(
  context: MirrorContext,
  options: SupervisorOptions = {},
): Promise<SupervisedOutcome> {
  const initialBackoffMs = options.initialBackoffMs ?? defaultRetryBackoff.initialMs;
  const maxBackoffMs = options.maxBackoffMs ?? defaultRetryBackoff.maxMs;
  const mirror = context.spec.name;
  let backoffMs = initialBackoffMs;
  context.source.reportConfigWarnings(context.spec.sourcePeer, (message) => {
    void mirrorLog(context, 'WARN', message);
  });
  let fault: OpenFault | undefined;
  let streaming = false;
  // Catalog writes from the progress callbacks run one at a time, in order.
  let pendingWrites: Promise<void> = Promise.resolve();
  const enqueue = (write: () => Promise<void>) => {
    pendingWrites = pendingWrites.then(write).catch((error: unknown) => {
      context.logger.warn({ err: error }, 'could not record the mirror fault state');
    });
  };
  const clearFault = () => {
    const cleared = fault;
    if (!cleared) return;
    fault = undefined;
    const seconds = Math.round((Date.now() - cleared.since) / 100) / 10;
    enqueue(async () => {
      await context.catalog.setRetryingError(mirror, null);
      await mirrorLog(
        context,
        'WARN',
        `recovered after ${seconds}s and ${cleared.attempts} attempt(s): ${cleared.message}`,
      );
    });
  };
  // One watchdog across retries: a stall shows once, however often the run restarts.
  const stallAfterMs = context.stallAfterMs ?? defaultStallAfterMs;
  const watchdog = new ProgressWatchdog({
    stallAfterMs,
    onStall(stall) {
      context.metrics?.stalled(mirror, true);
      enqueue(async () => {
        await context.catalog.setStall(mirror, stall);
        await mirrorLog(
          context,
          'WARN',
          `stalled: no progress for ${Math.round(stallAfterMs / 1000)}s while waiting on ${stall.step} (since ${stall.since.toISOString()})`,
        );
      });
    },
    onResume(stall, stalledMs) {
      context.metrics?.stalled(mirror, false);
      enqueue(async () => {
        await context.catalog.setStall(mirror, null);
        await mirrorLog(
          context,
          'INFO',
          `no longer stalled after ${Math.round(stalledMs / 1000)}s: ${stall.step}`,
        );
      });
    },
  });
  const supervised: MirrorContext = {
    ...context,
    watchdog,
    progress: {
      streaming() {
        streaming = true;
        context.progress?.streaming();
        if (fault && !fault.whileStreaming) clearFault();
      },
      durable() {
        context.progress?.durable();
        backoffMs = initialBackoffMs;
        clearFault();
      },
    },
  };

  try {
    for (;;) {
      streaming = false;
      try {
        return await runMirror(supervised);
      } catch (caught) {
        await pendingWrites;
        // The one classifier, so a driver error that escaped a connector (a
        // refused socket) still gets its kind rather than `internal`.
        const error: EngineError = classifyError(caught, 'mirror run', 'internal');
        const { retry, remedy } = error.policy;
        context.logger.error({ err: error, kind: error.kind }, 'mirror run failed');
        context.metrics?.runFailed(mirror, error.kind, retry === 'timed');
        if (retry !== 'timed') {
          await mirrorLog(context, 'ERROR', `${error.message}. ${remedy}`);
          await movePhase(context.catalog, mirror, 'failedForGood', `${error.message}. ${remedy}`).catch(
            (refused: unknown) => context.logger.warn({ err: refused }, 'could not record the failure'),
          );
          await context.catalog.setRetryingError(mirror, null).catch(() => {});
          return 'failed';
        }
        const shown = `${error.message}; retrying. ${remedy}`;
        if (fault?.message !== shown) {
          // A new fault (or another one): one WARN line, and the status shows it.
          fault = {
            message: shown,
            attempts: 1,
            since: fault?.since ?? Date.now(),
            whileStreaming: streaming,
          };
          await mirrorLog(context, 'WARN', shown);
          await context.catalog
            .setRetryingError(mirror, shown)
            .catch((refused: unknown) => context.logger.warn({ err: refused }, 'could not record the fault'));
        } else {
          fault = { ...fault, attempts: fault.attempts + 1, whileStreaming: streaming };
        }
        try {
          await delay(jitteredDelayMs(backoffMs), undefined, { signal: context.signal });
        } catch {
          return 'stopped';
        }
        backoffMs = Math.min(backoffMs * 2, maxBackoffMs);
      }
    }
  } finally {
    watchdog.stop();
    await pendingWrites;
    // Stopped or failed: no fault is being retried any more.
    if (fault) await context.catalog.setRetryingError(mirror, null).catch(() => {});
  }
}

// How far the destination is behind the source, in the source's time: the
// commit time of the oldest transaction the stream has begun whose commit is
// not yet durable at the destination (not yet acknowledged to the slot), as
// seconds before now; 0 when there is none, i.e. every transaction received is
// durable (caught up). An idle mirror reads 0, however long ago its last batch
// was; one that falls behind reads how old the oldest change still on its way
// is. What the server has not sent yet is not counted (the WAL the slot
// retains, read at the source, says how much that is: control/slot-health.ts).
//
// Bounded memory: transactions that begin within one second of the oldest one
// in the same run share one entry, so the pending list holds at most one entry
// per second of pending commits; an entry only partly durable keeps its first
// commit time, so the figure errs by less than a second, upwards.
//
// Called from the change applier's thread only: `begun` for each transaction's
// Begin message, `acknowledged` with every position acknowledged to the slot.

import type { MirrorRuntime } from '../catalog/catalog.ts';

interface PendingCommits {
  /** Final LSN of the first and of the last transaction in the entry. */
  readonly firstFinalLsn: bigint;
  lastFinalLsn: bigint;
  /** Commit time of the first, in ms since the epoch. */
  readonly commitTimeMs: number;
}

export class ReplicationDelay {
  #pending: PendingCommits[] = [];
  /** Index of the oldest entry still pending (entries before it are durable). */
  #head = 0;
  #lastAppliedCommitMs: number | undefined;

  /** A transaction begins in the stream (pgoutput Begin: its commit's LSN and time). */
  begun(finalLsn: bigint, commitTimeMicros: bigint): void {
    const commitTimeMs = Number(commitTimeMicros / 1000n);
    const newest = this.#pending.length > this.#head ? this.#pending[this.#pending.length - 1] : undefined;
    // A transaction replayed after a restart or a reconnect begins again: counted once.
    if (newest && finalLsn <= newest.lastFinalLsn) return;
    if (newest && commitTimeMs - newest.commitTimeMs < 1_000) newest.lastFinalLsn = finalLsn;
    else this.#pending.push({ firstFinalLsn: finalLsn, lastFinalLsn: finalLsn, commitTimeMs });
  }

  /** Everything before `lsn` is durable at the destination (the slot was told so). */
  acknowledged(lsn: bigint): void {
    while (this.#head < this.#pending.length) {
      const oldest = this.#pending[this.#head];
      if (!oldest || oldest.firstFinalLsn >= lsn) break;
      if (oldest.lastFinalLsn >= lsn) break;
      this.#lastAppliedCommitMs = oldest.commitTimeMs;
      this.#head++;
    }
    // Compacted once the durable entries are the larger part, so the list stays small.
    if (this.#head > 64 && this.#head * 2 > this.#pending.length) {
      this.#pending = this.#pending.slice(this.#head);
      this.#head = 0;
    }
  }

  /** Seconds the oldest transaction not yet durable has waited since its commit at the source; 0 when caught up. */
  secondsAt(nowMs: number): number {
    const oldest = this.#pending[this.#head];
    if (!oldest) return 0;
    return Math.max(0, (nowMs - oldest.commitTimeMs) / 1000);
  }

  /** Commit time of the oldest transaction not yet durable; null when caught up. */
  get pendingSince(): Date | null {
    const oldest = this.#pending[this.#head];
    return oldest ? new Date(oldest.commitTimeMs) : null;
  }

  /** Commit time of the last transaction known durable (within an entry's second), if any. */
  get lastAppliedCommitTime(): Date | undefined {
    return this.#lastAppliedCommitMs === undefined ? undefined : new Date(this.#lastAppliedCommitMs);
  }
}

/**
 * Lag in whole seconds as status shows it: while the engine streams (phase
 * running or pausing), the time since MirrorRuntime.lagSince, the oldest change
 * not yet written (0 when caught up); undefined otherwise (paused, failed, in
 * the initial load: the slot's retained WAL is the figure then).
 */
export function lagSecondsOf(
  runtime: Pick<MirrorRuntime, 'phase' | 'lagSince'> | undefined,
  nowMs = Date.now(),
): number | undefined {
  if (runtime?.phase !== 'running' && runtime?.phase !== 'pausing') return undefined;
  const { lagSince } = runtime;
  return lagSince === null ? 0 : Math.max(0, Math.round((nowMs - lagSince.getTime()) / 1000));
}

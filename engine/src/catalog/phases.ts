// The mirror lifecycle as a state machine, and its one writer. Every process
// (the engine's pipeline and supervisor, the reconciler in standalone mode and
// in the operator) moves a mirror's phase by calling this module with what
// happened (an event); nothing else writes the phase. docs/mirror-lifecycle.md
// shows the same transition and event tables (phases.test.ts keeps them equal,
// and fails when a file outside this module writes the phase).
import type { Catalog, MirrorPhase } from './catalog.ts';

/** `new` stands for "no runtime row yet". */
export type PhaseOrigin = MirrorPhase | 'new';

export const phaseTransitions = {
  new: ['setup', 'terminating', 'failed'],
  setup: ['setup', 'snapshot', 'running', 'pausing', 'terminating', 'failed'],
  snapshot: ['snapshot', 'running', 'completed', 'pausing', 'terminating', 'failed'],
  running: ['running', 'snapshot', 'pausing', 'terminating', 'failed'],
  pausing: ['paused', 'terminating', 'failed'],
  paused: ['setup', 'snapshot', 'running', 'terminating', 'failed'],
  completed: ['terminating'],
  failed: ['setup', 'snapshot', 'running', 'pausing', 'terminating', 'failed'],
  terminating: ['terminating', 'terminated', 'failed'],
  terminated: ['setup'],
} as const satisfies Record<PhaseOrigin, readonly MirrorPhase[]>;

/**
 * What moves a mirror, and the phase each event leads to. Where the mirror
 * may come from is the transition table's to say, by the phase it is in.
 */
export const phaseEvents = {
  /** The engine starts a mirror that has no runtime record (a new one, or one re-created after a drop). */
  setupStarted: 'setup',
  /** The engine starts the initial load (or starts it over), or loads tables an edit added. */
  loadStarted: 'snapshot',
  /** The engine's replication stream is open. */
  streamingStarted: 'running',
  /** An initial-load-only mirror finished its load. */
  loadOnlyFinished: 'completed',
  /** A person asked for a pause: the engine stops at the next batch boundary. */
  pauseRequested: 'pausing',
  /** The engine of a pausing mirror has exited (or none ran). */
  engineStoppedForPause: 'paused',
  /** An error whose policy is `manual` or `never` (errors.ts): a person must act. */
  failedForGood: 'failed',
  /** The mirror is being dropped: its slot and created publication are removed. */
  dropStarted: 'terminating',
  /** The drop removed what the mirror created. */
  dropFinished: 'terminated',
} as const satisfies Record<string, MirrorPhase>;

export type PhaseEvent = keyof typeof phaseEvents;

export function canTransition(from: PhaseOrigin, to: MirrorPhase): boolean {
  return (phaseTransitions[from] as readonly MirrorPhase[]).includes(to);
}

/** The phases from which `to` may be entered. */
export function phasesLeadingTo(to: MirrorPhase): PhaseOrigin[] {
  return (Object.keys(phaseTransitions) as PhaseOrigin[]).filter((from) => canTransition(from, to));
}

/** What of the catalog the phase's writer uses: the mirror's runtime record. */
export type PhaseRecord = Pick<Catalog, 'getRuntime' | 'transition' | 'startNewIncarnation'>;

/**
 * Moves the mirror to the phase `event` leads to, with `errorMessage` (shown
 * by the status; null clears it). The catalog checks the transition table
 * against the phase it holds in the same statement as the write, so two
 * processes cannot both make a move the table forbids; a refused move throws
 * PhaseTransitionError (phase-error.ts) and leaves the phase as it was.
 */
export async function movePhase(
  catalog: PhaseRecord,
  mirror: string,
  event: PhaseEvent,
  errorMessage: string | null = null,
): Promise<void> {
  await catalog.transition(mirror, phaseEvents[event], errorMessage);
}

/**
 * `movePhase`, only when the table allows the move from the phase the mirror
 * is in now; otherwise the phase stays (a pause asked of a mirror that is
 * already pausing, a failure of one that completed). Returns whether it moved.
 * A phase changed by another process between the read and the write is
 * refused by the catalog as in `movePhase`.
 */
export async function movePhaseIfAllowed(
  catalog: PhaseRecord,
  mirror: string,
  event: PhaseEvent,
  errorMessage: string | null = null,
): Promise<boolean> {
  const current = (await catalog.getRuntime(mirror))?.phase ?? 'new';
  if (!canTransition(current, phaseEvents[event])) return false;
  await movePhase(catalog, mirror, event, errorMessage);
  return true;
}

/**
 * A mirror created under the name of a dropped one starts clean: when the
 * stored phase is `terminated`, the runtime record is forgotten (the mirror is
 * `new` again) and the old mirror's logs are kept as an earlier incarnation
 * (Catalog.startNewIncarnation). Returns whether there was a dropped mirror.
 */
export async function forgetDroppedMirror(catalog: PhaseRecord, mirror: string): Promise<boolean> {
  return await catalog.startNewIncarnation(mirror);
}

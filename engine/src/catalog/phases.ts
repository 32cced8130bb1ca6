// The mirror lifecycle as a transition table. docs/mirror-lifecycle.md shows the
// same table (a test keeps them equal); every phase change goes through
// `Catalog.transition`, which refuses a move the table does not allow.
import type { MirrorPhase } from './catalog.ts';

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

export function canTransition(from: PhaseOrigin, to: MirrorPhase): boolean {
  return (phaseTransitions[from] as readonly MirrorPhase[]).includes(to);
}

/** The phases from which `to` may be entered. */
export function phasesLeadingTo(to: MirrorPhase): PhaseOrigin[] {
  return (Object.keys(phaseTransitions) as PhaseOrigin[]).filter((from) => canTransition(from, to));
}

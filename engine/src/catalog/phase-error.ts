import { EngineError } from '../errors.ts';
import type { MirrorPhase } from './catalog.ts';
import type { PhaseOrigin } from './phases.ts';

/** A phase change the lifecycle does not allow, e.g. resuming a dropped mirror. */
export class PhaseTransitionError extends EngineError {
  readonly from: PhaseOrigin;
  readonly to: MirrorPhase;

  constructor(mirror: string, from: PhaseOrigin, to: MirrorPhase) {
    super('config', `mirror ${mirror} cannot go from ${from} to ${to}`);
    this.name = 'PhaseTransitionError';
    this.from = from;
    this.to = to;
  }
}

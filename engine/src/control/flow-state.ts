import type { MirrorPhase } from '../catalog/catalog.ts';

/** The interface's state names (`currentFlowState`), by lifecycle phase. */
export const flowStateByPhase = {
  setup: 'STATUS_SETUP',
  snapshot: 'STATUS_SNAPSHOT',
  running: 'STATUS_RUNNING',
  pausing: 'STATUS_PAUSING',
  paused: 'STATUS_PAUSED',
  completed: 'STATUS_COMPLETED',
  failed: 'STATUS_FAILED',
  terminating: 'STATUS_TERMINATING',
  terminated: 'STATUS_TERMINATED',
} as const satisfies Record<MirrorPhase, string>;

export type FlowState = (typeof flowStateByPhase)[MirrorPhase] | 'STATUS_UNKNOWN';

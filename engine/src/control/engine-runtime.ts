// How a reconciler runs engines. Standalone mode runs them in its own process;
// the operator runs one pod per mirror (issue of the Kubernetes runtime).

import type { SupervisedOutcome } from '../pipeline/supervisor.ts';
import type { MirrorSpec } from '../resources/mirror.ts';
import type { Peer, RelationalConfig } from '../resources/peer.ts';
import type { ScriptSource } from '../resources/script.ts';

/** Everything an engine needs to run one mirror, secrets included. */
export interface EngineRunConfig {
  readonly spec: MirrorSpec;
  readonly source: RelationalConfig;
  readonly destination: Peer;
  readonly script?: ScriptSource | undefined;
}

export interface EngineRuntime {
  /** The generation of the mirror spec the running engine was started with. */
  runningGeneration(mirror: string): Promise<number | undefined>;
  /**
   * Starts the engine (at most one per mirror: a second start while one runs is
   * refused). `onExit` is called once, when the engine ends by itself or stops.
   */
  start(
    mirror: string,
    generation: number,
    config: EngineRunConfig,
    onExit: (outcome: SupervisedOutcome) => void,
  ): Promise<void>;
  /** Asks the engine to stop at its next batch boundary and waits until it has. */
  stop(mirror: string): Promise<void>;
  /** Drops the mirror at the source (slot, created publication) and in the catalog. */
  teardown(config: EngineRunConfig): Promise<void>;
}

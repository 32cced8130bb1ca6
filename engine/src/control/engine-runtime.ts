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

/** Which mirror an engine runs, and at which generation of its spec. */
export interface EngineTarget {
  readonly name: string;
  /** The mirror object's uid: what the engine's objects are owned by. */
  readonly uid: string;
  readonly generation: number;
}

/** What a running engine was started with. */
export interface RunningEngine {
  readonly generation: number;
  /** `configHash` of what it runs: a different hash means it must restart. */
  readonly configHash: string;
}

export interface EngineRuntime {
  /** The running engine of a mirror, if one runs (or is meant to: a scaled-up StatefulSet). */
  running(mirror: string): Promise<RunningEngine | undefined>;
  /**
   * A fingerprint of everything the engine would run with for `config` (peers'
   * secrets and script source included; for pods, the pod template too).
   * Pure and deterministic: compared with `running().configHash`.
   */
  configHash(target: EngineTarget, config: EngineRunConfig): string;
  /**
   * Starts the engine (at most one per mirror: a second start while one runs is
   * refused). `onExit` is called once, when the engine ends by itself or stops.
   */
  start(
    target: EngineTarget,
    config: EngineRunConfig,
    onExit: (outcome: SupervisedOutcome) => void,
  ): Promise<void>;
  /** Asks the engine to stop at its next batch boundary and waits until it has. */
  stop(mirror: string): Promise<void>;
  /**
   * The config the mirror's engine was last started with, kept until teardown
   * or `forget`: a mirror deleted together with its peers (one `kubectl delete
   * -k`) is still torn down with it.
   */
  lastConfig(mirror: string): Promise<EngineRunConfig | undefined>;
  /** Drops the mirror at the source (slot, created publication) and in the catalog, then what the runtime kept. */
  teardown(config: EngineRunConfig): Promise<void>;
  /** The mirror is gone without a teardown (its object was force-deleted): removes what the runtime kept. */
  forget(mirror: string): Promise<void>;
}

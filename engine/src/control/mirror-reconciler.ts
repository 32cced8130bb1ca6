// Drives one mirror towards its resource: running, paused or dropped. Shape:
// fetch → not found → deletion → desired state → act → requeue. The same steps
// serve standalone mode (`reconcile`, which reads the mirror) and the operator's
// mirror controller (operator/src/controllers/mirror.ts), which reads the
// object once itself and calls `gone`, `drop` and `apply` in its own shape;
// only the EngineRuntime differs.
import type { Logger } from 'pino';
import type { Catalog, MirrorPhase, MirrorRuntime } from '../catalog/catalog.ts';
import { forgetDroppedMirror, movePhase, movePhaseIfAllowed } from '../catalog/phases.ts';
import { EngineError } from '../errors.ts';
import { logLifecycle } from '../observability/lifecycle-log.ts';
import type { ScriptSource } from '../resources/script.ts';
import { type MissingDependency, resolveDependencies } from './dependencies.ts';
import type { EngineRunConfig, EngineRuntime } from './engine-runtime.ts';
import type { MirrorResource } from './resources.ts';
import type { ResourceStore } from './store.ts';

export interface MirrorReconcilerOptions {
  readonly store: ResourceStore;
  readonly catalog: Catalog;
  readonly runtime: EngineRuntime;
  readonly logger: Logger;
  /** Called when a mirror needs another look (an engine ended). */
  readonly requeue: (mirror: string) => void;
}

/** What acting on a live mirror came to. */
export interface MirrorOutcome {
  readonly requeueAfterMs?: number;
  /** The peer or script the mirror waits for (it cannot start without it). */
  readonly waitingFor?: MissingDependency;
}

/** How often a settled mirror is looked at again. */
const resyncMs = 30_000;
/** How often a mirror waiting for a peer or script looks for it. */
const waitingRecheckMs = 3_000;

/**
 * The wait before starting again an engine that ended by itself while its
 * mirror should run (it crashed, or could not record why it failed): 1 s,
 * doubling up to a minute, so no cause can make the reconciler start engines
 * in a tight loop. An engine that ran for longer than the cap starts the count
 * over; so do a pause, an edit and a failure carried to `failed` (a person acts next).
 */
export const engineRestartBackoff = { initialMs: 1_000, maxMs: 60_000 } as const;

/** The delay before the `restarts`-th start in a row of an engine that keeps ending by itself. */
export function engineRestartDelayMs(restarts: number): number {
  if (restarts <= 0) return 0;
  return Math.min(engineRestartBackoff.initialMs * 2 ** (restarts - 1), engineRestartBackoff.maxMs);
}

/** An engine this reconciler started, as it was when started. */
interface StartedEngine {
  readonly generation: number;
  readonly startedAt: number;
  /** The runtime row's `updatedAt` at the start: a later failure moves it. */
  readonly phaseUpdatedAtMs: number | undefined;
}

/** Engines of a mirror that ended by themselves, one start after the other. */
interface SelfEndedEngines {
  readonly restarts: number;
  readonly endedAt: number;
}

export class MirrorReconciler {
  readonly #options: MirrorReconcilerOptions;
  /** What each waiting mirror last logged that it waits for. */
  readonly #waitingFor = new Map<string, string>();
  /** The spec each mirror's engine was last started with here, to tell an edit in the log. */
  readonly #startedSpecs = new Map<string, string>();
  /** The engine each mirror last got from this reconciler. */
  readonly #started = new Map<string, StartedEngine>();
  /** Mirrors whose engines ended by themselves: their next start waits (engineRestartBackoff). */
  readonly #selfEnded = new Map<string, SelfEndedEngines>();
  /** Mirrors whose engine this reconciler is stopping: that end is not one by itself. */
  readonly #stopping = new Set<string>();

  constructor(options: MirrorReconcilerOptions) {
    this.#options = options;
  }

  /** Reads the mirror once and acts on it; `removed` once it no longer exists. */
  async reconcile(name: string): Promise<MirrorOutcome & { readonly removed: boolean }> {
    const mirror = await this.#options.store.getMirror(name);
    if (!mirror) {
      await this.gone(name);
      return { removed: true };
    }
    if (mirror.deleting) {
      await this.drop(mirror);
      return { removed: true };
    }
    return { ...(await this.apply(mirror)), removed: false };
  }

  /**
   * The mirror does not exist. Already torn down (nothing kept), or gone
   * without a teardown: its object was force-deleted (finalizer removed by
   * hand). Then what the engine last ran with still names the slot and
   * publication it created, and they are dropped with it; otherwise the slot
   * would hold WAL at the source forever. The user bypassed the finalizer, so a
   * teardown that fails does not hold the engine's objects: it is said, and
   * they are released all the same.
   */
  async gone(name: string): Promise<void> {
    const { runtime } = this.#options;
    await this.#stop(name);
    const kept = await runtime.lastConfig(name);
    if (kept) {
      this.#options.logger.warn({ mirror: name }, 'mirror gone without its teardown: tearing down now');
      try {
        await runtime.teardown(kept);
        return;
      } catch (error) {
        this.#options.logger.warn(
          { mirror: name, err: error },
          'force-deleted mirror: slot and publication left at the source',
        );
        await this.#options.catalog.appendLog(
          name,
          'WARN',
          'deleted without its teardown, which then failed: remove its replication slot and publication by hand',
        );
      }
    }
    await runtime.forget(name);
  }

  /**
   * Moves a live mirror (not being deleted) towards its desired state, as read
   * by the caller; says what it waits for when a peer or script is missing.
   */
  async apply(mirror: MirrorResource): Promise<MirrorOutcome> {
    if (mirror.spec.state === 'Paused') {
      await this.#pause(mirror);
      return { requeueAfterMs: resyncMs };
    }
    const outcome = await this.#run(mirror);
    if (outcome === 'settled') return { requeueAfterMs: resyncMs };
    if ('restartInMs' in outcome) return { requeueAfterMs: outcome.restartInMs };
    // A running engine keeps what it has while a dependency is missing.
    if (outcome.engineRunning) return { requeueAfterMs: resyncMs, waitingFor: outcome.waitingFor };
    return { requeueAfterMs: waitingRecheckMs, waitingFor: outcome.waitingFor };
  }

  async #phase(name: string): Promise<MirrorPhase | undefined> {
    return (await this.#options.catalog.getRuntime(name))?.phase;
  }

  /** Stops the mirror's engine; an end asked for here is never backed off. */
  async #stop(name: string): Promise<void> {
    this.#stopping.add(name);
    try {
      await this.#options.runtime.stop(name);
    } finally {
      this.#stopping.delete(name);
      this.#selfEnded.delete(name);
    }
  }

  /** Called when an engine ends; an end by itself makes the next start wait. */
  #engineEnded(name: string): void {
    if (this.#stopping.has(name)) return;
    const started = this.#started.get(name);
    const now = Date.now();
    // Ran long enough to count as healthy: the next end starts the count over.
    const ranLong = started !== undefined && now - started.startedAt >= engineRestartBackoff.maxMs;
    const restarts = ranLong ? 1 : (this.#selfEnded.get(name)?.restarts ?? 0) + 1;
    this.#selfEnded.set(name, { restarts, endedAt: now });
  }

  /**
   * Whether the engine running at this generation failed for good since this
   * reconciler started it. A runtime that reports an engine's end (in-process,
   * local processes) says so at once; an engine pod is restarted by its
   * kubelet instead, and would meet the same fault again and again: there the
   * phase recorded after the start tells.
   */
  #failedSinceStart(name: string, stored: MirrorRuntime | undefined, generation: number): boolean {
    const started = this.#started.get(name);
    return (
      stored?.phase === 'failed' &&
      started !== undefined &&
      started.generation === generation &&
      stored.updatedAt.getTime() !== started.phaseUpdatedAtMs
    );
  }

  async #pause(mirror: MirrorResource): Promise<void> {
    const { runtime, catalog } = this.#options;
    if ((await runtime.running(mirror.name)) !== undefined) {
      await movePhaseIfAllowed(catalog, mirror.name, 'pauseRequested');
      await this.#stop(mirror.name);
    }
    // Also when no engine ran (e.g. after a restart): the phase still says active.
    await movePhaseIfAllowed(catalog, mirror.name, 'pauseRequested');
    // Only a pausing mirror may become paused (the table), so this moves once.
    if (await movePhaseIfAllowed(catalog, mirror.name, 'engineStoppedForPause')) {
      await catalog.appendLog(mirror.name, 'INFO', 'mirror paused');
      logLifecycle(this.#options.logger, mirror.name, 'paused');
    }
  }

  async #run(
    mirror: MirrorResource,
  ): Promise<
    'settled' | { waitingFor: MissingDependency; engineRunning: boolean } | { restartInMs: number }
  > {
    const { runtime, catalog, store } = this.#options;
    // A mirror created under the name of a dropped one starts clean; the old
    // mirror's logs stay readable as an earlier incarnation.
    if ((await this.#phase(mirror.name)) === 'terminated') await forgetDroppedMirror(catalog, mirror.name);
    const stored = await catalog.getRuntime(mirror.name);
    const phase = stored?.phase;
    const running = await runtime.running(mirror.name);
    let waitsForPerson = phase === 'failed' && mirror.failedGeneration === mirror.generation;
    if (!waitsForPerson && running?.generation === mirror.generation) {
      if (this.#failedSinceStart(mirror.name, stored, mirror.generation)) {
        await store.recordMirrorFailure(mirror.name, mirror.generation);
        logLifecycle(
          this.#options.logger,
          mirror.name,
          'failed',
          'stopped until a person acts (see its logs)',
        );
        waitsForPerson = true;
      }
    }
    const target = { name: mirror.name, uid: mirror.objectUid ?? mirror.uid, generation: mirror.generation };
    let config: EngineRunConfig | MissingDependency | undefined;
    if (running !== undefined) {
      const current = running.generation === mirror.generation && !waitsForPerson && phase !== 'completed';
      if (current) {
        // Same spec: restart only when what it runs changed (a peer's password
        // in its Secret, the script's source, the engine pod settings). While a
        // dependency is missing the running engine keeps what it has.
        config = await this.#engineConfig(mirror);
        if (config && 'reason' in config) return { waitingFor: config, engineRunning: true };
        if (!config || runtime.configHash(target, config) === running.configHash) return 'settled';
        await catalog.appendLog(
          mirror.name,
          'INFO',
          'engine config changed (peer secret, script or pod settings): restarting the engine',
        );
      }
      // The spec or the config changed under a running engine (restart it at a
      // batch boundary), or the engine failed for good or finished: stop it.
      await this.#stop(mirror.name);
    }
    if (phase === 'completed' || waitsForPerson) {
      // Settled until a person acts; their resume or retry starts at once.
      this.#selfEnded.delete(mirror.name);
      return 'settled';
    }
    const selfEnded = this.#selfEnded.get(mirror.name);
    if (selfEnded) {
      const restartInMs = selfEnded.endedAt + engineRestartDelayMs(selfEnded.restarts) - Date.now();
      if (restartInMs > 0) {
        this.#options.logger.warn(
          { mirror: mirror.name, restartInMs, restarts: selfEnded.restarts },
          'engine ended by itself: starting it again after a pause',
        );
        return { restartInMs };
      }
    }
    // A pause under way when the mirror was resumed: no engine runs by now, so
    // the pause is complete before the new engine starts (pausing → running is not a move).
    if (phase === 'pausing') await movePhase(catalog, mirror.name, 'engineStoppedForPause');
    config ??= await this.#engineConfig(mirror);
    if (!config) return 'settled';
    if ('reason' in config) {
      // Logged once per cause: the mirror is looked at again every few seconds.
      if (this.#waitingFor.get(mirror.name) !== config.message) {
        this.#waitingFor.set(mirror.name, config.message);
        await catalog.appendLog(mirror.name, 'WARN', `waiting: ${config.message}`);
      }
      return { waitingFor: config, engineRunning: false };
    }
    this.#waitingFor.delete(mirror.name);
    this.#started.set(mirror.name, {
      generation: mirror.generation,
      startedAt: Date.now(),
      phaseUpdatedAtMs: stored?.updatedAt.getTime(),
    });
    await runtime.start(target, config, (outcome) => {
      this.#engineEnded(mirror.name);
      if (outcome === 'failed') {
        logLifecycle(
          this.#options.logger,
          mirror.name,
          'failed',
          'stopped until a person acts (see its logs)',
        );
        void this.#options.store
          .recordMirrorFailure(mirror.name, mirror.generation)
          .finally(() => this.#options.requeue(mirror.name));
      } else {
        this.#options.requeue(mirror.name);
      }
    });
    if (phase === 'paused') await catalog.appendLog(mirror.name, 'INFO', 'mirror resumed');
    this.#logStart(mirror, phase, JSON.stringify(config.spec));
    return 'settled';
  }

  /** What starting an engine means to a person reading the process log. */
  #logStart(mirror: MirrorResource, phase: MirrorPhase | undefined, specText: string): void {
    const { logger } = this.#options;
    const previous = this.#startedSpecs.get(mirror.name);
    this.#startedSpecs.set(mirror.name, specText);
    if (previous !== undefined && previous !== specText)
      logLifecycle(logger, mirror.name, 'edited', `running generation ${mirror.generation}`);
    if (phase === undefined) logLifecycle(logger, mirror.name, 'created');
    else if (phase === 'paused') logLifecycle(logger, mirror.name, 'resumed');
    else if (phase === 'failed') logLifecycle(logger, mirror.name, 'recovered', 'retrying after a failure');
  }

  /** Tears down a mirror being deleted, then lets its resource go. */
  async drop(mirror: MirrorResource): Promise<void> {
    const { runtime, store, logger } = this.#options;
    await this.#stop(mirror.name);
    let config = await this.#engineConfig(mirror);
    // Its peers (or their Secrets) were deleted with it: tear down with what
    // the engine last ran with.
    if (!config || 'reason' in config) config = (await runtime.lastConfig(mirror.name)) ?? config;
    if (config && !('reason' in config)) {
      await runtime.teardown(config);
    } else {
      const cause = config?.message ?? 'its peers cannot be used';
      logger.warn(
        { mirror: mirror.name, cause },
        'dropped without removing the slot and publication at the source',
      );
      await this.#options.catalog.appendLog(
        mirror.name,
        'WARN',
        `dropped without removing the replication slot and publication at the source (${cause}); remove them by hand`,
      );
    }
    await store.removeMirror(mirror.name);
    this.#startedSpecs.delete(mirror.name);
    this.#started.delete(mirror.name);
    logLifecycle(logger, mirror.name, 'dropped');
  }

  /** Records why the mirror cannot run; it waits for a change of its spec. */
  async #fail(mirror: MirrorResource, error: EngineError): Promise<void> {
    const { store, catalog } = this.#options;
    await catalog.appendLog(mirror.name, 'ERROR', `${error.message}. ${error.policy.remedy}`);
    await movePhaseIfAllowed(catalog, mirror.name, 'failedForGood', error.message);
    await store.recordMirrorFailure(mirror.name, mirror.generation);
    logLifecycle(this.#options.logger, mirror.name, 'failed', error.message);
  }

  /**
   * The engine config; or what the mirror waits for; or undefined after
   * recording why it cannot run at all.
   */
  async #engineConfig(mirror: MirrorResource): Promise<EngineRunConfig | MissingDependency | undefined> {
    const dependencies = await resolveDependencies(this.#options.store, mirror);
    if (!dependencies.ready) return { reason: dependencies.reason, message: dependencies.message };
    const { source, destination, script } = dependencies;
    if (source.peer.kind !== 'relational') {
      await this.#fail(
        mirror,
        new EngineError('config', `source peer ${mirror.spec.sourcePeer} is not a relational peer`),
      );
      return undefined;
    }
    const { state: _state, ...spec } = mirror.spec;
    const scriptSource: ScriptSource | undefined = script
      ? { name: script.name, lang: script.lang, source: script.source }
      : undefined;
    return { spec, source: source.peer.config, destination: destination.peer, script: scriptSource };
  }
}

// Drives one mirror towards its resource: running, paused or dropped. Shape:
// fetch → not found → deletion → desired state → act → requeue. The same
// reconciler serves standalone mode and the operator; only the EngineRuntime
// differs.
import type { Logger } from 'pino';
import type { Catalog, MirrorPhase } from '../catalog/catalog.ts';
import { canTransition } from '../catalog/phases.ts';
import { EngineError } from '../errors.ts';
import type { ScriptSource } from '../resources/script.ts';
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

/** How often a settled mirror is looked at again. */
const resyncMs = 30_000;

export class MirrorReconciler {
  readonly #options: MirrorReconcilerOptions;

  constructor(options: MirrorReconcilerOptions) {
    this.#options = options;
  }

  async reconcile(name: string): Promise<{ requeueAfterMs?: number }> {
    const { store, runtime } = this.#options;
    const mirror = await store.getMirror(name);
    if (!mirror) {
      await runtime.stop(name);
      return {};
    }
    if (mirror.deleting) {
      await this.#drop(mirror);
      return {};
    }
    if (mirror.spec.state === 'Paused') await this.#pause(mirror);
    else await this.#run(mirror);
    return { requeueAfterMs: resyncMs };
  }

  async #phase(name: string): Promise<MirrorPhase | undefined> {
    return (await this.#options.catalog.getRuntime(name))?.phase;
  }

  /** Moves the phase if the lifecycle allows it from where it is; otherwise leaves it. */
  async #moveTo(name: string, phase: MirrorPhase): Promise<void> {
    const current = await this.#phase(name);
    if (current !== phase && canTransition(current ?? 'new', phase)) {
      await this.#options.catalog.transition(name, phase);
    }
  }

  async #pause(mirror: MirrorResource): Promise<void> {
    const { runtime, catalog } = this.#options;
    if ((await runtime.runningGeneration(mirror.name)) !== undefined) {
      await this.#moveTo(mirror.name, 'pausing');
      await runtime.stop(mirror.name);
    }
    // Also when no engine ran (e.g. after a restart): the phase still says active.
    await this.#moveTo(mirror.name, 'pausing');
    if ((await this.#phase(mirror.name)) === 'pausing') {
      await catalog.transition(mirror.name, 'paused');
      await catalog.appendLog(mirror.name, 'INFO', 'mirror paused');
    }
  }

  async #run(mirror: MirrorResource): Promise<void> {
    const { runtime, catalog } = this.#options;
    const phase = await this.#phase(mirror.name);
    const runningGeneration = await runtime.runningGeneration(mirror.name);
    const waitsForPerson = phase === 'failed' && mirror.failedGeneration === mirror.generation;
    if (runningGeneration !== undefined) {
      if (runningGeneration === mirror.generation && !waitsForPerson && phase !== 'completed') return;
      // The spec changed under a running engine (restart it at a batch boundary),
      // or the engine failed for good or finished: stop it.
      await runtime.stop(mirror.name);
    }
    if (phase === 'completed' || waitsForPerson) return;
    if (phase === 'pausing') await catalog.transition(mirror.name, 'paused');
    const config = await this.#engineConfig(mirror);
    if (!config) return;
    await runtime.start(mirror.name, mirror.generation, config, (outcome) => {
      if (outcome === 'failed') {
        void this.#options.store
          .recordMirrorFailure(mirror.name, mirror.generation)
          .finally(() => this.#options.requeue(mirror.name));
      } else {
        this.#options.requeue(mirror.name);
      }
    });
    if (phase === 'paused') await catalog.appendLog(mirror.name, 'INFO', 'mirror resumed');
  }

  async #drop(mirror: MirrorResource): Promise<void> {
    const { runtime, store, logger } = this.#options;
    await runtime.stop(mirror.name);
    const config = await this.#engineConfig(mirror);
    if (config) {
      await runtime.teardown(config);
    } else {
      logger.warn(
        { mirror: mirror.name },
        'a peer is gone: the slot and publication at the source were not removed',
      );
    }
    await store.removeMirror(mirror.name);
  }

  /** Records why the mirror cannot run; it waits for a change of its spec. */
  async #fail(mirror: MirrorResource, error: EngineError): Promise<void> {
    const { store, catalog } = this.#options;
    await catalog.appendLog(mirror.name, 'ERROR', `${error.message}. ${error.policy.remedy}`);
    if (canTransition((await this.#phase(mirror.name)) ?? 'new', 'failed')) {
      await catalog.transition(mirror.name, 'failed', error.message);
    }
    await store.recordMirrorFailure(mirror.name, mirror.generation);
  }

  /** The engine config, or undefined after recording why the mirror cannot run. */
  async #engineConfig(mirror: MirrorResource): Promise<EngineRunConfig | undefined> {
    const { store } = this.#options;
    const [source, destination] = await Promise.all([
      store.getPeer(mirror.spec.sourcePeer),
      store.getPeer(mirror.spec.destinationPeer),
    ]);
    const problem = !source
      ? `source peer ${mirror.spec.sourcePeer} does not exist`
      : source.peer.kind !== 'relational'
        ? `source peer ${mirror.spec.sourcePeer} is not a relational peer`
        : !destination
          ? `destination peer ${mirror.spec.destinationPeer} does not exist`
          : undefined;
    if (problem || !source || source.peer.kind !== 'relational' || !destination) {
      await this.#fail(mirror, new EngineError('config', problem ?? 'peers missing'));
      return undefined;
    }
    const { state: _state, ...spec } = mirror.spec;
    let script: ScriptSource | undefined;
    if (spec.script) {
      const found = await store.getScriptByName(spec.script);
      if (!found) {
        await this.#fail(mirror, new EngineError('script', `script ${spec.script} does not exist`));
        return undefined;
      }
      script = { name: found.name, lang: found.lang, source: found.source };
    }
    return { spec, source: source.peer.config, destination: destination.peer, script };
  }
}

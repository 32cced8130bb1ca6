// Every fault kind of the policy table (engine/src/errors.ts) met by a resume
// from `paused` and by a retry from `failed`: the real reconciler, store and
// catalog of standalone mode, engines in this process against the test
// PostgreSQL, the destination wrapped so that its first step (setupTables)
// fails with the kind. A `manual` or `never` fault fails the mirror with its
// remedy and the log stays quiet; a `timed` one is retried and shows meanwhile,
// and the mirror runs once it is gone.
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane } from '../../api-server/src/index.ts';
import type { Catalog } from '../../engine/src/catalog/catalog.ts';
import { FaultInjectingDestination } from '../../engine/src/connectors/memory/fault-injecting.ts';
import { PostgresDestination } from '../../engine/src/connectors/postgres/destination/destination.ts';
import { createSource } from '../../engine/src/connectors/registry.ts';
import type {
  EngineRunConfig,
  EngineRuntime,
  EngineTarget,
} from '../../engine/src/control/engine-runtime.ts';
import { MirrorReconciler } from '../../engine/src/control/mirror-reconciler.ts';
import type { ResourceStore } from '../../engine/src/control/store.ts';
import { WorkQueue } from '../../engine/src/control/work-queue.ts';
import { EngineError, type ErrorKind, errorKinds, errorPolicy } from '../../engine/src/errors.ts';
import { defaultBatchMemoryBudgetBytes } from '../../engine/src/pipeline/context.ts';
import { type SupervisedOutcome, superviseMirror } from '../../engine/src/pipeline/supervisor.ts';
import { mirrorSpecSchema } from '../../engine/src/resources/mirror.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import { createHarness, type Harness, mapping } from '../support/mirror-harness.ts';

const logger = pino({ level: process.env.TRIBUTARY_TEST_LOG ?? 'silent' });

/** In-process engines whose destination fails setup with the fault the test sets. */
class FaultingRuntime implements EngineRuntime {
  readonly #catalog: Catalog;
  readonly #engines = new Map<
    string,
    {
      generation: number;
      controller: AbortController;
      destination: FaultInjectingDestination;
      done: Promise<SupervisedOutcome>;
    }
  >();
  #fault: EngineError | undefined;
  starts = 0;

  constructor(catalog: Catalog) {
    this.#catalog = catalog;
  }

  /** What setup fails with from now on, in running engines too (their next attempt); undefined heals. */
  setFault(fault: EngineError | undefined): void {
    this.#fault = fault;
    for (const engine of this.#engines.values()) engine.destination.failSetup(fault);
  }

  async running(mirror: string) {
    const engine = this.#engines.get(mirror);
    return engine && { generation: engine.generation, configHash: '' };
  }
  configHash(): string {
    return '';
  }
  async start(target: EngineTarget, config: EngineRunConfig, onExit: (outcome: SupervisedOutcome) => void) {
    this.starts++;
    const destination = new FaultInjectingDestination(
      new PostgresDestination(
        config.destination.kind === 'relational' ? config.destination.config : config.source,
        {
          system: config.spec.system,
          mirrorColumns: {
            softDeleteColumn: config.spec.softDeleteColName,
            syncedAtColumn: config.spec.syncedAtColName,
          },
          applicationName: `tributary:${target.name}:destination`,
          logger,
        },
      ),
    );
    destination.failSetup(this.#fault);
    const controller = new AbortController();
    const done = superviseMirror(
      {
        spec: config.spec,
        source: createSource({ kind: 'relational', config: config.source }, { mirror: target.name }),
        destination,
        catalog: this.#catalog,
        logger,
        signal: controller.signal,
        batchMemoryBudgetBytes: defaultBatchMemoryBudgetBytes,
      },
      { initialBackoffMs: 200, maxBackoffMs: 400 },
    ).finally(() => destination.close());
    this.#engines.set(target.name, { generation: target.generation, controller, destination, done });
    void done.then((outcome) => {
      this.#engines.delete(target.name);
      onExit(outcome);
    });
  }
  async stop(mirror: string) {
    const engine = this.#engines.get(mirror);
    if (!engine) return;
    engine.controller.abort();
    await engine.done.catch(() => {});
    while (this.#engines.get(mirror) === engine) await new Promise((resolve) => setImmediate(resolve));
  }
  async lastConfig() {
    return undefined;
  }
  async teardown() {}
  async forget() {}
}

const fails = (kind: ErrorKind) => errorPolicy[kind].retry !== 'timed';

describe('a resume or retry meeting each fault kind', () => {
  let harness: Harness;
  let close: () => Promise<void>;
  let store: ResourceStore;
  let catalog: Catalog;
  let runtime: FaultingRuntime;
  const mirror = `faults-${randomSuffix()}`;

  const phase = async () => (await catalog.getRuntime(mirror))?.phase;
  const reaches = (expected: string, what: string) =>
    waitFor(async () => (await phase()) === expected, 30_000, `${what}: ${expected}`).catch(async (error) => {
      throw new Error(`${what}: ${JSON.stringify(await catalog.getRuntime(mirror))}`, { cause: error });
    });
  const logWrites = async () =>
    (await catalog.listLogs({ mirror, offset: 0, limit: 1_000 })).entries.reduce(
      (writes, entry) => writes + entry.repeatCount,
      0,
    );
  // A person retries a failure they see: once the failed engine has ended and
  // the failure is marked. (A retry inside the few milliseconds between the
  // catalog's failed phase and the mark is taken back by the mark.)
  const failureMarked = () =>
    waitFor(
      async () =>
        (await runtime.running(mirror)) === undefined &&
        (await store.getMirror(mirror))?.failedGeneration !== undefined,
      30_000,
      'the failure marked',
    );
  const setState = async (state: 'Running' | 'Paused') => {
    const current = await store.getMirror(mirror);
    if (!current) throw new Error('mirror gone');
    await store.updateMirrorSpec(mirror, { ...current.spec, state });
  };

  beforeAll(async () => {
    harness = await createHarness('resume_faults');
    await harness.source.client.query(`CREATE TABLE items (id int PRIMARY KEY, v text)`);
    await harness.source.client.query(`INSERT INTO items SELECT g, 'v' || g FROM generate_series(1, 10) g`);
    const controlPlane = await startControlPlane({ dataDir: 'memory://', logger, runEngines: false });
    ({ store, catalog } = controlPlane);
    runtime = new FaultingRuntime(catalog);
    let queue: WorkQueue | undefined;
    const reconciler = new MirrorReconciler({
      store,
      catalog,
      runtime,
      logger,
      requeue: (name) => queue?.add(name),
    });
    const workQueue = new WorkQueue(async (name) => {
      const { requeueAfterMs } = await reconciler.reconcile(name);
      return requeueAfterMs === undefined ? undefined : { requeueAfterMs };
    });
    queue = workQueue;
    const unwatch = store.watch((event) => {
      if (event.kind === 'mirror') workQueue.add(event.name);
    });
    close = async () => {
      unwatch();
      await workQueue.stop();
      await runtime.stop(mirror);
      await controlPlane.close();
    };
    await store.putPeer({ name: 'source', kind: 'relational', config: harness.source.config }, null);
    await store.putPeer(
      { name: 'destination', kind: 'relational', config: harness.destination.config },
      null,
    );
    const spec = mirrorSpecSchema.parse({
      name: mirror,
      sourcePeer: 'source',
      destinationPeer: 'destination',
      tableMappings: [mapping('items')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    });
    await store.createMirror({ ...spec, state: 'Running' });
    await reaches('running', 'first start');
  }, 120_000);

  afterAll(async () => {
    await close?.();
    await harness?.close();
  });

  it.each(errorKinds.map((kind) => [kind, errorPolicy[kind].retry]))(
    '%s (%s) from paused and from failed',
    async (kind) => {
      const fault = new EngineError(kind as ErrorKind, `destination: injected ${kind} fault`);
      const remedy = errorPolicy[kind as ErrorKind].remedy;
      await setState('Paused');
      await reaches('paused', 'pause');

      // From paused.
      runtime.setFault(fault);
      await setState('Running');
      if (fails(kind as ErrorKind)) {
        await reaches('failed', 'resume');
        expect((await catalog.getRuntime(mirror))?.errorMessage).toBe(`${fault.message}. ${remedy}`);
        const [before, startsBefore] = [await logWrites(), runtime.starts];
        // Failed for good: no engine is started again, the log holds still.
        const until = Date.now() + 3_000;
        await waitFor(
          async () => {
            if (runtime.starts !== startsBefore) throw new Error('the engine was started again');
            if ((await logWrites()) - before > 1) throw new Error('the log keeps growing');
            return Date.now() >= until;
          },
          10_000,
          'a quiet failed mirror',
        );
      } else {
        await waitFor(
          async () => (await catalog.getRuntime(mirror))?.retryingError?.includes(fault.message) === true,
          30_000,
          'the retried fault to show',
        );
        expect(await phase()).toBe('paused');
        // Then it fails for a fault that needs a person, for the retry below.
        runtime.setFault(new EngineError('config', 'destination: injected config fault'));
        await reaches('failed', 'a config fault');
      }

      // From failed: the retry meets the fault again.
      runtime.setFault(fault);
      const startsBefore = runtime.starts;
      await failureMarked();
      await store.requestMirrorRetry(mirror);
      await waitFor(async () => runtime.starts > startsBefore, 30_000, 'the retry to start an engine');
      if (fails(kind as ErrorKind)) {
        // The retry's engine ended on the fault (the message alone may be the one before).
        await failureMarked();
        expect((await catalog.getRuntime(mirror))?.errorMessage).toBe(`${fault.message}. ${remedy}`);
        expect(await phase()).toBe('failed');
        // The fault removed, a retry runs the mirror.
        runtime.setFault(undefined);
        await store.requestMirrorRetry(mirror);
      } else {
        await waitFor(
          async () => (await catalog.getRuntime(mirror))?.retryingError?.includes(fault.message) === true,
          30_000,
          'the retried fault to show',
        );
        // A timed fault heals by itself: the engine's next attempt runs.
        runtime.setFault(undefined);
      }
      await reaches('running', 'fault removed');
    },
    120_000,
  );
});

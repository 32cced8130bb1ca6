// Engines as tasks of this process (standalone mode).
import type { Logger } from 'pino';
import type { Catalog } from '../catalog/catalog.ts';
import { createSource } from '../connectors/registry.ts';
import { EngineError } from '../errors.ts';
import type { PipelineMetrics } from '../observability/engine-metrics.ts';
import { defaultBatchMemoryBudgetBytes } from '../pipeline/context.ts';
import { createMirrorDestination } from '../pipeline/mirror-destination.ts';
import { teardownMirror } from '../pipeline/run-mirror.ts';
import { type SupervisedOutcome, superviseMirror } from '../pipeline/supervisor.ts';
import { configHash } from './config-hash.ts';
import type { EngineRunConfig, EngineRuntime, EngineTarget, RunningEngine } from './engine-runtime.ts';

interface EngineTask {
  readonly generation: number;
  readonly configHash: string;
  readonly controller: AbortController;
  readonly done: Promise<SupervisedOutcome>;
}

export interface InProcessRuntimeOptions {
  readonly catalog: Catalog;
  readonly logger: Logger;
  readonly batchMemoryBudgetBytes?: number;
  readonly metrics?: PipelineMetrics;
  readonly retryBackoffMs?: { readonly initial: number; readonly max: number };
  /** The stall bound of every engine (pipeline/progress-watchdog.ts); its default when absent. */
  readonly stallAfterMs?: number;
}

export class InProcessEngineRuntime implements EngineRuntime {
  readonly #options: InProcessRuntimeOptions;
  readonly #engines = new Map<string, EngineTask>();
  readonly #lastConfigs = new Map<string, EngineRunConfig>();

  constructor(options: InProcessRuntimeOptions) {
    this.#options = options;
  }

  async running(mirror: string): Promise<RunningEngine | undefined> {
    const engine = this.#engines.get(mirror);
    return engine && { generation: engine.generation, configHash: engine.configHash };
  }

  configHash(_target: EngineTarget, config: EngineRunConfig): string {
    return configHash(config);
  }

  async lastConfig(mirror: string): Promise<EngineRunConfig | undefined> {
    return this.#lastConfigs.get(mirror);
  }

  async forget(mirror: string): Promise<void> {
    this.#lastConfigs.delete(mirror);
  }

  async start(
    target: EngineTarget,
    config: EngineRunConfig,
    onExit: (outcome: SupervisedOutcome) => void,
  ): Promise<void> {
    const { name: mirror, generation } = target;
    if (this.#engines.has(mirror))
      throw new EngineError('internal', `an engine already runs mirror ${mirror}`);
    const logger = this.#options.logger.child({ mirror });
    const controller = new AbortController();
    const { catalog } = this.#options;
    const destination = createMirrorDestination(config.destination, {
      spec: config.spec,
      logger,
      script: config.script,
      // A script's print() lands in the mirror's logs.
      log: (level, message) => void catalog.appendLog(mirror, level, message).catch(() => {}),
    });
    const backoff = this.#options.retryBackoffMs;
    const done = superviseMirror(
      {
        spec: config.spec,
        source: createSource({ kind: 'relational', config: config.source }, { mirror }),
        destination,
        catalog: this.#options.catalog,
        logger,
        signal: controller.signal,
        batchMemoryBudgetBytes: this.#options.batchMemoryBudgetBytes ?? defaultBatchMemoryBudgetBytes,
        ...(this.#options.metrics ? { metrics: this.#options.metrics } : {}),
        ...(this.#options.stallAfterMs === undefined ? {} : { stallAfterMs: this.#options.stallAfterMs }),
      },
      backoff ? { initialBackoffMs: backoff.initial, maxBackoffMs: backoff.max } : {},
    )
      .catch((error: unknown): SupervisedOutcome => {
        logger.error({ err: error }, 'engine crashed');
        return 'failed';
      })
      .finally(() => destination.close().catch(() => {}));
    this.#engines.set(mirror, { generation, configHash: configHash(config), controller, done });
    this.#lastConfigs.set(mirror, config);
    void done.then((outcome) => {
      this.#engines.delete(mirror);
      onExit(outcome);
    });
  }

  async stop(mirror: string): Promise<void> {
    const engine = this.#engines.get(mirror);
    if (!engine) return;
    engine.controller.abort();
    await engine.done;
    // onExit removes the entry; wait for that microtask so a restart sees it gone.
    while (this.#engines.get(mirror) === engine) await new Promise((resolve) => setImmediate(resolve));
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.#engines.keys()].map((mirror) => this.stop(mirror)));
  }

  async teardown(config: EngineRunConfig): Promise<void> {
    await teardownWithConfig(config, this.#options.catalog, this.#options.logger);
    this.#lastConfigs.delete(config.spec.name);
  }
}

/** Drops a mirror from this process; any runtime uses it once the mirror's engine is stopped. */
export async function teardownWithConfig(
  config: EngineRunConfig,
  catalog: Catalog,
  parentLogger: Logger,
): Promise<void> {
  const logger = parentLogger.child({ mirror: config.spec.name });
  const destination = createMirrorDestination(config.destination, {
    spec: config.spec,
    logger,
    script: config.script,
  });
  try {
    const source = createSource({ kind: 'relational', config: config.source }, { mirror: config.spec.name });
    await teardownMirror({ spec: config.spec, source, destination, catalog, logger });
  } finally {
    await destination.close();
  }
}

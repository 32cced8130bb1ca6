// Engines as local processes (`tributary engine run`), standing in for pods
// where no kubelet runs (the test control plane) or for an operator run outside
// a cluster. The engine config is written to a 0600 file, never to arguments or
// the environment.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import {
  type Catalog,
  configHash,
  type EngineRunConfig,
  type EngineRuntime,
  type EngineTarget,
  type RunningEngine,
  type SupervisedOutcome,
  teardownWithConfig,
} from '../../../engine/src/index.ts';
import { engineConfigDocument } from './engine-config-file.ts';

interface RunningProcess {
  readonly generation: number;
  readonly configHash: string;
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
}

export interface LocalProcessRuntimeOptions {
  readonly catalog: Catalog;
  readonly catalogUrl: string;
  readonly logger: Logger;
  /** Where config files are written (created 0700). */
  readonly workDir: string;
  /** The `tributary` entry point to run. */
  readonly entryPoint: string;
}

export class LocalProcessEngineRuntime implements EngineRuntime {
  readonly #options: LocalProcessRuntimeOptions;
  readonly #processes = new Map<string, RunningProcess>();
  /** In memory only: an operator restarted after its engine ran cannot use it. */
  readonly #lastConfigs = new Map<string, EngineRunConfig>();

  constructor(options: LocalProcessRuntimeOptions) {
    this.#options = options;
    mkdirSync(options.workDir, { recursive: true, mode: 0o700 });
  }

  async running(mirror: string): Promise<RunningEngine | undefined> {
    const running = this.#processes.get(mirror);
    return running && { generation: running.generation, configHash: running.configHash };
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
    if (this.#processes.has(mirror)) return;
    const configPath = join(this.#options.workDir, `${mirror}.json`);
    writeFileSync(configPath, JSON.stringify(engineConfigDocument(config, this.#options.catalogUrl)), {
      mode: 0o600,
    });
    const child = spawn(
      process.execPath,
      [this.#options.entryPoint, 'engine', 'run', '--mirror', mirror, '--config', configPath],
      {
        stdio: ['ignore', 'ignore', 'inherit'],
        env: {
          ...process.env,
          TRIBUTARY_LOG_LEVEL: process.env.TRIBUTARY_LOG_LEVEL ?? 'warn',
          TRIBUTARY_PARENT_PID: String(process.pid),
        },
      },
    );
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    this.#processes.set(mirror, { generation, configHash: configHash(config), child, exited });
    this.#lastConfigs.set(mirror, config);
    this.#options.logger.info({ mirror, pid: child.pid, generation }, 'engine process started');
    void exited.then((code) => {
      this.#processes.delete(mirror);
      rmSync(configPath, { force: true });
      // Exit 0: stopped or completed (the catalog says which); 1: failed for good.
      onExit(code === 0 ? 'stopped' : 'failed');
    });
  }

  async stop(mirror: string): Promise<void> {
    const running = this.#processes.get(mirror);
    if (!running) return;
    running.child.kill('SIGTERM');
    await running.exited;
    while (this.#processes.get(mirror) === running) await new Promise((resolve) => setImmediate(resolve));
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.#processes.keys()].map((mirror) => this.stop(mirror)));
  }

  async teardown(config: EngineRunConfig): Promise<void> {
    await teardownWithConfig(config, this.#options.catalog, this.#options.logger);
    this.#lastConfigs.delete(config.spec.name);
  }
}

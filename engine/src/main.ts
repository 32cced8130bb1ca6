// The `engine` role: runs one mirror until it is stopped (SIGTERM/SIGINT: the
// current batch is finished and acknowledged first) or fails for good.
//
//   tributary engine run --mirror <name> --config <file> [--metrics-port N]
import { parseArgs } from 'node:util';
import pg from 'pg';
import { type LogRetention, logRetentionFromEnvironment } from './catalog/log-retention.ts';
import { PostgresCatalog } from './catalog/postgres-catalog.ts';
import { createSource } from './connectors/registry.ts';
import { loadEngineConfig } from './engine-config.ts';
import { isEngineError } from './errors.ts';
import { EngineMetrics } from './observability/engine-metrics.ts';
import { createProcessLogger } from './observability/logger.ts';
import { type MetricsServer, serveMetrics } from './observability/metrics-server.ts';
import { logProcessWarnings } from './observability/process-warnings.ts';
import { defaultBatchMemoryBudgetBytes } from './pipeline/context.ts';
import { createMirrorDestination } from './pipeline/mirror-destination.ts';
import { stallAfterMsFromEnvironment } from './pipeline/progress-watchdog.ts';
import { superviseMirror } from './pipeline/supervisor.ts';

const usage = `usage: tributary engine run --mirror <name> --config <file> [--metrics-port N]

Runs one mirror from an engine config file (YAML or JSON: mirror spec, source
and destination peers with their secrets, catalog URL). Stops at a batch
boundary on SIGTERM or SIGINT. With --metrics-port (or TRIBUTARY_METRICS_PORT)
it serves Prometheus metrics on GET /metrics of that port (0: any free port,
logged). Exit codes: 0 stopped or completed, 1 failed, 2 usage or
configuration error.`;

export async function main(argv: readonly string[]): Promise<number> {
  let parsed: ReturnType<typeof parseCommand>;
  try {
    parsed = parseCommand(argv);
  } catch (error) {
    console.error(`${(error as Error).message}\n\n${usage}`);
    return 2;
  }
  if (parsed === 'help') {
    console.log(usage);
    return 0;
  }
  const logger = createProcessLogger({
    level: process.env.TRIBUTARY_LOG_LEVEL ?? 'info',
    base: { mirror: parsed.mirror },
  });
  logProcessWarnings(logger);
  let config: Awaited<ReturnType<typeof loadEngineConfig>>;
  let stallAfterMs: number;
  try {
    config = await loadEngineConfig(parsed.configPath);
    stallAfterMs = stallAfterMsFromEnvironment();
  } catch (error) {
    logger.error({ err: error }, 'cannot start engine');
    return 2;
  }
  let logRetention: LogRetention;
  try {
    logRetention = logRetentionFromEnvironment(process.env);
  } catch (error) {
    logger.error({ err: error }, 'cannot start engine');
    return 2;
  }
  if (config.mirror.name !== parsed.mirror) {
    logger.error({ configured: config.mirror.name }, 'the config file is for another mirror');
    return 2;
  }

  const controller = new AbortController();
  const stop = (signal: string) => {
    logger.info({ signal }, 'stopping at the next batch boundary');
    controller.abort();
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
  // Started by a local-process runtime: stop when that process is gone (it was
  // killed), or its replacement would start a second engine for this mirror.
  const parentPid = Number(process.env.TRIBUTARY_PARENT_PID ?? 0);
  if (parentPid > 0) {
    const watch = setInterval(() => {
      if (process.ppid !== parentPid) {
        clearInterval(watch);
        stop('parent exited');
      }
    }, 500);
    watch.unref();
  }

  const metrics = new EngineMetrics({ processMetrics: true });
  let metricsServer: MetricsServer | undefined;
  if (parsed.metricsPort !== undefined) {
    try {
      metricsServer = await serveMetrics(metrics.registry, parsed.metricsPort);
    } catch (error) {
      logger.error({ err: error, port: parsed.metricsPort }, 'cannot serve metrics');
      return 2;
    }
    logger.info({ port: metricsServer.port }, 'serving metrics on /metrics');
  }

  const catalogPool = new pg.Pool({ connectionString: config.catalog.url, max: 2 });
  catalogPool.on('error', (error) => logger.warn({ err: error }, 'catalog connection error'));
  const catalog = new PostgresCatalog(catalogPool, { logRetention });
  const destination = createMirrorDestination(config.destination, {
    spec: config.mirror,
    logger,
    script: config.script,
    // A script's print() lands in the mirror's logs.
    log: (level, message) => void catalog.appendLog(config.mirror.name, level, message).catch(() => {}),
  });
  try {
    await catalog.migrate();
    const outcome = await superviseMirror({
      spec: config.mirror,
      source: createSource({ kind: 'relational', config: config.source }, { mirror: config.mirror.name }),
      destination,
      catalog,
      logger,
      signal: controller.signal,
      batchMemoryBudgetBytes: config.batchMemoryBudgetBytes ?? defaultBatchMemoryBudgetBytes,
      metrics,
      stallAfterMs,
    });
    logger.info({ outcome }, 'engine finished');
    return outcome === 'failed' ? 1 : 0;
  } catch (error) {
    logger.error({ err: error, kind: isEngineError(error) ? error.kind : 'internal' }, 'engine failed');
    return 1;
  } finally {
    await destination.close().catch(() => {});
    await catalogPool.end().catch(() => {});
    await metricsServer?.close();
  }
}

interface EngineCommand {
  readonly mirror: string;
  readonly configPath: string;
  readonly metricsPort: number | undefined;
}

function parseCommand(argv: readonly string[]): EngineCommand | 'help' {
  const { values, positionals } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      mirror: { type: 'string' },
      config: { type: 'string' },
      'metrics-port': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return 'help';
  if (positionals[0] !== 'run' || positionals.length !== 1) throw new Error('expected the command `run`');
  if (!values.mirror) throw new Error('--mirror is required');
  if (!values.config) throw new Error('--config is required');
  const port = values['metrics-port'] ?? process.env.TRIBUTARY_METRICS_PORT;
  const metricsPort = port === undefined || port === '' ? undefined : Number(port);
  if (
    metricsPort !== undefined &&
    !(Number.isInteger(metricsPort) && metricsPort >= 0 && metricsPort <= 65535)
  ) {
    throw new Error(`--metrics-port must be a port number (0-65535), not ${port}`);
  }
  return { mirror: values.mirror, configPath: values.config, metricsPort };
}

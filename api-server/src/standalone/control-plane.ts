// Standalone mode's control plane in one process: the embedded database (PGlite)
// holding resources and the catalog, the mirror reconciler on a work queue, and
// engines as in-process tasks. Restarting the process resumes every mirror from
// its checkpoint: all mirrors are reconciled once `resumeMirrors` is called,
// which standalone mode does after its listener is up.

import { PGlite } from '@electric-sql/pglite';
import type { Logger } from 'pino';
import {
  type AuditRetention,
  EngineMetrics,
  InProcessEngineRuntime,
  type LogRetention,
  MirrorNoticeWatch,
  MirrorReconciler,
  PostgresCatalog,
  SlotHealthMetrics,
  SlotHealthMonitor,
  slotHealthIntervalMsFromEnvironment,
  stallAfterMsFromEnvironment,
  type WebhookConfig,
  WebhookNotifier,
  WorkQueue,
} from '../../../engine/src/index.ts';
import { secureDataDirectory } from './data-dir.ts';
import { EmbeddedStore } from './embedded-store.ts';
import { initialiseDataDirectory } from './initdb-process.ts';
import type { PeerSecretFiles } from './peer-secret-files.ts';

/** The embedded database's shared_buffers (docs/startup.md, Memory). */
export const catalogSharedBuffers = '16MB';

export interface ControlPlaneOptions {
  /** A directory, or `memory://` for a throw-away instance. */
  readonly dataDir: string;
  readonly logger: Logger;
  /** Where peer secret fields may come from files (`--peer-secrets-dir`). */
  readonly peerSecretFiles?: PeerSecretFiles;
  /** Whether to run mirrors (off for facade-only tests). */
  readonly runEngines?: boolean;
  readonly retryBackoffMs?: { readonly initial: number; readonly max: number };
  /** How many of each mirror's log entries the catalog keeps (log-retention.ts). */
  readonly logRetention?: LogRetention;
  /** How many audit entries the catalog keeps (audit-retention.ts). */
  readonly auditRetention?: AuditRetention;
  /** How long an engine's step may make no progress before it shows as stalled; TRIBUTARY_STALL_SECONDS otherwise. */
  readonly stallAfterMs?: number;
  /** How often every mirror's slot is read at its source; TRIBUTARY_SLOT_HEALTH_SECONDS otherwise. */
  readonly slotHealthIntervalMs?: number;
  /** Where notifications go (docs/observability.md, Notifications); none without it. */
  readonly notifications?: { readonly webhook: WebhookConfig; readonly intervalMs?: number };
}

export interface ControlPlane {
  readonly store: EmbeddedStore;
  readonly catalog: PostgresCatalog;
  /** What the in-process engines report, for the facade's /metrics (absent when engines do not run). */
  readonly engineMetrics?: EngineMetrics;
  /**
   * Queues every stored mirror for reconciling (each resumes from its
   * checkpoint). Called once the API listens: twenty engines starting share this
   * thread and the embedded database with the listener, and would otherwise
   * hold back its first answer by seconds.
   */
  resumeMirrors(): Promise<void>;
  /** Resolves once every reconcile in progress has finished (for tests). */
  idle(): Promise<void>;
  close(): Promise<void>;
}

/** Makes the data directory private and, on a first start, initialises it (initdb-process.ts). */
async function prepareDataDirectory(dataDir: string, startParams: string[], logger: Logger): Promise<void> {
  const changed = secureDataDirectory(dataDir);
  if (changed > 0) {
    logger.warn(
      { dataDir, entries: changed },
      'data directory was readable by others: set it to 0700 and its files to 0600',
    );
  }
  const initdb = await initialiseDataDirectory(dataDir, { startParams });
  if (!initdb) return;
  logger.info(
    {
      dataDir,
      durationMs: initdb.durationMs,
      childEnded: initdb.childEnded,
      ...(initdb.childPeakRssKiB === undefined
        ? {}
        : { initdbPeakRssMiB: Math.round(initdb.childPeakRssKiB / 1024) }),
    },
    'data directory initialised by a child process',
  );
}

export async function startControlPlane(options: ControlPlaneOptions): Promise<ControlPlane> {
  // The catalog is small (resources, batches, logs): 16 MB of buffers hold it,
  // and the default 128 MB became ~140 MiB of resident memory once touched.
  const startParams = [...PGlite.defaultStartParams, '-c', `shared_buffers=${catalogSharedBuffers}`];
  if (!options.dataDir.startsWith('memory://')) {
    await prepareDataDirectory(options.dataDir, startParams, options.logger);
  }
  const database = await PGlite.create(options.dataDir, { startParams });
  const catalog = new PostgresCatalog(database, {
    ...(options.logRetention ? { logRetention: options.logRetention } : {}),
    ...(options.auditRetention ? { auditRetention: options.auditRetention } : {}),
  });
  const store = new EmbeddedStore(database, options.peerSecretFiles);
  await catalog.migrate();
  await store.migrate();
  const { logger } = options;

  if (options.runEngines === false) {
    return {
      store,
      catalog,
      resumeMirrors: async () => {},
      idle: async () => {},
      close: () => database.close(),
    };
  }

  // The engines share this process, so the process's own metrics come with theirs.
  const engineMetrics = new EngineMetrics({ processMetrics: true });
  const runtime = new InProcessEngineRuntime({
    catalog,
    logger,
    metrics: engineMetrics,
    // Read once, here at start-up (an invalid value stops the service with its name).
    stallAfterMs: options.stallAfterMs ?? stallAfterMsFromEnvironment(),
    ...(options.retryBackoffMs ? { retryBackoffMs: options.retryBackoffMs } : {}),
  });
  // The queue and the reconciler refer to each other: an engine that ends requeues its mirror.
  let queue: WorkQueue | undefined;
  const reconciler = new MirrorReconciler({
    store,
    catalog,
    runtime,
    logger,
    requeue: (mirror) => queue?.add(mirror),
  });
  queue = new WorkQueue(
    async (mirror) => {
      const { removed, requeueAfterMs } = await reconciler.reconcile(mirror);
      // A dropped mirror's engine series go with it: the next scrape no longer shows them.
      if (removed) await engineMetrics.forgetMirror(mirror);
      return requeueAfterMs === undefined ? undefined : { requeueAfterMs };
    },
    {
      onError: (mirror, error) => logger.warn({ mirror, err: error }, 'reconcile failed; retrying'),
    },
  );
  const workQueue = queue;
  const unwatch = store.watch((event) => {
    if (event.kind === 'mirror') workQueue.add(event.name);
  });
  // What a person is told (a mirror failed, a slot in danger, …), read from the catalog.
  const notifier = options.notifications
    ? new WebhookNotifier({
        config: options.notifications.webhook,
        origin: async () => ({ installation: await catalog.installationId() }),
        logger,
      })
    : undefined;
  // Every mirror's slot at its source, whatever the mirror's state: a paused or
  // failed mirror has no engine reporting, and its slot keeps WAL all the same.
  const slotHealth = new SlotHealthMonitor({
    store,
    catalog,
    logger,
    sink: new SlotHealthMetrics({ registry: engineMetrics.registry }),
    notifier,
    intervalMs: options.slotHealthIntervalMs ?? slotHealthIntervalMsFromEnvironment(),
  });

  const notices = notifier
    ? new MirrorNoticeWatch({
        store,
        catalog,
        notifier,
        logger,
        ...(options.notifications?.intervalMs ? { intervalMs: options.notifications.intervalMs } : {}),
      })
    : undefined;

  return {
    store,
    catalog,
    engineMetrics,
    async resumeMirrors() {
      for (const mirror of await store.listMirrors()) workQueue.add(mirror.name);
      slotHealth.start();
      notices?.start();
    },
    idle: () => workQueue.idle(),
    async close() {
      unwatch();
      await notices?.stop();
      await notifier?.close();
      await slotHealth.stop();
      await workQueue.stop();
      await runtime.stopAll();
      await database.close();
    },
  };
}

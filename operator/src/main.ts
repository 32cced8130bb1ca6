// The `operator` role: reconciles Peer, Mirror and Script resources of one
// namespace, one engine workload per mirror, with leader election so that of
// several replicas only one acts.
//
//   tributary operator --namespace NS --catalog-url URL [--engine-runtime statefulset|local-process]
import { hostname } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import pg from 'pg';
import { z } from 'zod';
import {
  createProcessLogger,
  type EngineRuntime,
  enginePodDefaultsSchema,
  logProcessWarnings,
  logRetentionInput,
  logRetentionSchema,
  type MetricsServer,
  MirrorNoticeWatch,
  noticeIntervalMsFromEnvironment,
  PostgresCatalog,
  SlotHealthMonitor,
  serveMetrics,
  slotHealthIntervalMsFromEnvironment,
  stallAfterMsFromEnvironment,
  type WebhookConfig,
  WebhookNotifier,
  WorkQueue,
  webhookConfigFromEnvironment,
} from '../../engine/src/index.ts';
import { reconcile } from './controllers/controller.ts';
import { MirrorController } from './controllers/mirror.ts';
import { PeerController } from './controllers/peer.ts';
import { ScriptController } from './controllers/script.ts';
import { EnginePods } from './engine-pods.ts';
import { EventRecorder } from './events.ts';
import { KubeStore } from './kube/kube-store.ts';
import { ReconcileStore } from './kube/reconcile-store.ts';
import { LeaderElector, operatorLeaseName } from './leader-election.ts';
import { OperatorMetrics } from './operator-metrics.ts';
import { LocalProcessEngineRuntime } from './runtime/local-process-runtime.ts';
import { StatefulSetEngineRuntime } from './runtime/statefulset-runtime.ts';

const usage = `usage: tributary operator [options]

  --namespace NS         TRIBUTARY_NAMESPACE (or POD_NAMESPACE)   namespace to reconcile
  --catalog-url URL      TRIBUTARY_CATALOG_URL    PostgreSQL URL of the catalog
  --engine-runtime KIND  TRIBUTARY_ENGINE_RUNTIME statefulset (default) or local-process
  --engine-image IMAGE   TRIBUTARY_ENGINE_IMAGE   image of engine pods
                         TRIBUTARY_ENGINE_POD     JSON: engine pod defaults (resources, nodeSelector,
                                                  tolerations, affinity, priorityClassName,
                                                  imagePullSecrets, labels, annotations)
                         TRIBUTARY_ENGINE_SERVICE_ACCOUNT  service account of engine pods (default tributary-engine)
  --kubeconfig FILE      KUBECONFIG               outside a cluster
  --identity NAME        POD_NAME / hostname       leader election identity
  --lease-seconds N      lease duration (default 15)
  --metrics-port N       TRIBUTARY_METRICS_PORT   serve Prometheus metrics on GET /metrics
                         TRIBUTARY_MIRROR_LOG_MAX_ENTRIES   log entries kept per mirror (default 10000)
                         TRIBUTARY_MIRROR_LOG_MAX_AGE_DAYS  days a log entry is kept (default 30; 0: no limit)
                         TRIBUTARY_STALL_SECONDS            an engine step without progress this long shows as stalled (default 300)
                         TRIBUTARY_SLOT_HEALTH_SECONDS      how often every mirror's slot is read at its source (default 30)
                         TRIBUTARY_NOTIFY_URL_FILE          send notifications to the webhook URL this file holds
                                                            (the chart mounts it from a Secret)
                         TRIBUTARY_NOTIFY_FORMAT            json (default) or slack
                         TRIBUTARY_NOTIFY_CHECK_SECONDS     how often mirrors are looked at for news (default 10)`;

const configSchema = z.object({
  namespace: z.string().min(1),
  catalogUrl: z.string().min(1),
  engineRuntime: z.enum(['statefulset', 'local-process']).default('statefulset'),
  engineImage: z.string().default('ghcr.io/tributary/tributary:latest'),
  engineServiceAccount: z.string().min(1).optional(),
  enginePod: z
    .string()
    .optional()
    .transform((text, context) => {
      if (!text) return undefined;
      try {
        return JSON.parse(text) as unknown;
      } catch {
        context.addIssue({ code: 'custom', message: 'TRIBUTARY_ENGINE_POD is not JSON' });
        return z.NEVER;
      }
    })
    .pipe(enginePodDefaultsSchema.optional()),
  kubeconfig: z.string().optional(),
  identity: z.string().min(1),
  leaseSeconds: z.coerce.number().int().min(2).default(15),
  metricsPort: z.coerce.number().int().min(0).max(65535).optional(),
  logLevel: z.string().default('info'),
  logRetention: logRetentionSchema,
});

export async function main(argv: readonly string[]): Promise<number> {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      namespace: { type: 'string' },
      'catalog-url': { type: 'string' },
      'engine-runtime': { type: 'string' },
      'engine-image': { type: 'string' },
      kubeconfig: { type: 'string' },
      identity: { type: 'string' },
      'lease-seconds': { type: 'string' },
      'metrics-port': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(usage);
    return 0;
  }
  const env = process.env;
  const parsed = configSchema.safeParse({
    namespace: values.namespace ?? env.TRIBUTARY_NAMESPACE ?? env.POD_NAMESPACE,
    catalogUrl: values['catalog-url'] ?? env.TRIBUTARY_CATALOG_URL,
    engineRuntime: values['engine-runtime'] ?? env.TRIBUTARY_ENGINE_RUNTIME,
    engineImage: values['engine-image'] ?? env.TRIBUTARY_ENGINE_IMAGE,
    enginePod: env.TRIBUTARY_ENGINE_POD || undefined,
    engineServiceAccount: env.TRIBUTARY_ENGINE_SERVICE_ACCOUNT || undefined,
    kubeconfig: values.kubeconfig ?? env.KUBECONFIG,
    identity: values.identity ?? env.POD_NAME ?? hostname(),
    leaseSeconds: values['lease-seconds'],
    metricsPort: values['metrics-port'] ?? (env.TRIBUTARY_METRICS_PORT || undefined),
    logLevel: env.TRIBUTARY_LOG_LEVEL,
    logRetention: logRetentionInput(env),
  });
  if (!parsed.success) {
    console.error(
      `tributary operator: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}\n\n${usage}`,
    );
    return 2;
  }
  const config = Object.freeze(parsed.data);
  let stallAfterMs: number;
  let slotHealthIntervalMs: number;
  let webhook: WebhookConfig | undefined;
  let noticeIntervalMs: number;
  try {
    stallAfterMs = stallAfterMsFromEnvironment(env);
    slotHealthIntervalMs = slotHealthIntervalMsFromEnvironment(env);
    webhook = webhookConfigFromEnvironment(env);
    noticeIntervalMs = noticeIntervalMsFromEnvironment(env);
  } catch (error) {
    console.error(`tributary operator: ${(error as Error).message}\n\n${usage}`);
    return 2;
  }
  const logger = createProcessLogger({
    level: config.logLevel,
    base: { role: 'operator', identity: config.identity },
  });
  logProcessWarnings(logger);
  const metrics = new OperatorMetrics({ namespace: config.namespace });
  let migrated = false;
  let elector: LeaderElector | undefined;
  let metricsServer: MetricsServer | undefined;
  if (config.metricsPort !== undefined) {
    try {
      // Ready once the catalog is migrated and the API server answered an
      // election round within a lease period (a standby is ready too).
      metricsServer = await serveMetrics(
        metrics.registry,
        config.metricsPort,
        '0.0.0.0',
        () =>
          migrated && elector !== undefined && Date.now() - elector.lastRoundAt < config.leaseSeconds * 1000,
      );
    } catch (error) {
      logger.error({ err: error, port: config.metricsPort }, 'cannot serve metrics');
      return 2;
    }
    logger.info({ port: metricsServer.port }, 'serving metrics on /metrics');
  }
  const kubeConfig = new KubeConfig();
  if (config.kubeconfig) kubeConfig.loadFromFile(config.kubeconfig);
  else kubeConfig.loadFromCluster();

  const pool = new pg.Pool({ connectionString: config.catalogUrl, max: 4 });
  pool.on('error', (error) => logger.warn({ err: error }, 'catalog connection error'));
  const catalog = new PostgresCatalog(pool, { logRetention: config.logRetention });
  // Whichever of the operator and the api-server starts first migrates the
  // catalog (under an advisory lock), so neither waits for the other.
  try {
    await catalog.migrate();
    migrated = true;
  } catch (error) {
    logger.error({ err: error }, 'cannot migrate the catalog');
    await pool.end();
    await metricsServer?.close();
    return 1;
  }
  // The facade's store, for the steps shared with standalone mode, the mirror list and the
  // watch; the controllers' reads and guarded writes apart (kube/reconcile-store.ts).
  const store = new KubeStore(kubeConfig, config.namespace);
  const objects = new ReconcileStore(kubeConfig, config.namespace);
  const events = new EventRecorder(kubeConfig, config.namespace, logger);
  const runtime: EngineRuntime & { stopAll?: () => Promise<void> } =
    config.engineRuntime === 'local-process'
      ? new LocalProcessEngineRuntime({
          catalog,
          catalogUrl: config.catalogUrl,
          logger,
          workDir: join(process.env.TMPDIR ?? '/tmp', `tributary-engines-${process.pid}`),
          entryPoint: join(import.meta.dirname, '..', '..', 'bin', 'tributary.ts'),
        })
      : new StatefulSetEngineRuntime({
          kubeConfig,
          namespace: config.namespace,
          image: config.engineImage,
          ...(config.enginePod ? { pod: config.enginePod } : {}),
          ...(config.engineServiceAccount ? { serviceAccountName: config.engineServiceAccount } : {}),
          catalog,
          catalogUrl: config.catalogUrl,
          logger,
          logRetention: config.logRetention,
          stallAfterMs,
        });

  const pods =
    config.engineRuntime === 'statefulset' ? new EnginePods(kubeConfig, config.namespace) : undefined;
  // One controller per kind, each in the shape of controllers/controller.ts,
  // on a work queue of its own (one reconcile per object at a time).
  let mirrorQueue: WorkQueue | undefined;
  const mirrors = new MirrorController({
    store,
    objects,
    catalog,
    runtime,
    events,
    logger,
    pods,
    onPodProblem: (name, reason) => metrics.enginePodProblem(name, reason),
    requeue: (name) => mirrorQueue?.add(name),
  });
  mirrorQueue = new WorkQueue(
    metrics.instrument('mirror', (name: string) => reconcile(mirrors, name)),
    {
      onError: (name, error) =>
        logger.warn({ mirror: name, err: error }, 'mirror reconcile failed; retrying'),
    },
  );
  const peers = new PeerController({ objects, events });
  const peerQueue = new WorkQueue(
    metrics.instrument('peer', (name: string) => reconcile(peers, name)),
    { onError: (name, error) => logger.warn({ peer: name, err: error }, 'peer check failed; retrying') },
  );
  const scripts = new ScriptController({ objects, events });
  const scriptQueue = new WorkQueue(
    metrics.instrument('script', (name: string) => reconcile(scripts, name)),
    {
      onError: (name, error) =>
        logger.warn({ script: name, err: error }, 'script reconcile failed; retrying'),
    },
  );

  const requeueMirrorsUsing = async (kind: 'peer' | 'script', name: string) => {
    try {
      for (const mirror of await store.listMirrors()) {
        const uses =
          kind === 'peer'
            ? mirror.spec.sourcePeer === name || mirror.spec.destinationPeer === name
            : mirror.spec.script === name;
        if (uses) mirrorQueue?.add(mirror.name);
      }
    } catch (error) {
      logger.warn({ err: error, [kind]: name }, 'cannot list mirrors to requeue; the resync will');
    }
  };

  // A Mirror force-deleted while no operator ran is never announced: look for
  // mirrors the catalog knows and the API does not, so their reconcile releases
  // what the runtime kept (the engine Secret's finalizer).
  const sweepForceDeleted = async () => {
    try {
      const existing = new Set((await store.listMirrors()).map((mirror) => mirror.name));
      for (const name of await catalog.listUnterminatedMirrors()) {
        if (!existing.has(name)) mirrorQueue?.add(name);
      }
    } catch (error) {
      logger.warn({ err: error }, 'cannot look for force-deleted mirrors');
    }
  };

  // What a person is told (a mirror failed, a slot in danger, …), read from
  // the catalog as standalone mode reads it; by the leader only, so one
  // notification per transition however many replicas run.
  const notifier = webhook
    ? new WebhookNotifier({
        config: webhook,
        origin: async () => ({ installation: await catalog.installationId(), namespace: config.namespace }),
        logger,
      })
    : undefined;
  // Every mirror's slot at its source, in every state (a paused or failed
  // mirror has no engine to report it); read by the leader only.
  const slotHealth = new SlotHealthMonitor({
    store,
    catalog,
    logger,
    sink: metrics.slotHealth,
    intervalMs: slotHealthIntervalMs,
    notifier,
    // The retained WAL limit dropped a slot: said on the Mirror too.
    onSlotDropped: (mirror, message) =>
      events.record({ kind: 'Mirror', name: mirror }, 'Warning', 'SlotDropped', message),
  });

  const notices = notifier
    ? new MirrorNoticeWatch({ store, catalog, notifier, logger, intervalMs: noticeIntervalMs })
    : undefined;

  let unwatch: (() => void) | undefined;
  elector = new LeaderElector({
    kubeConfig,
    namespace: config.namespace,
    leaseName: operatorLeaseName,
    identity: config.identity,
    leaseDurationMs: config.leaseSeconds * 1000,
    renewDeadlineMs: Math.round(config.leaseSeconds * 666),
    retryPeriodMs: Math.max(500, Math.round(config.leaseSeconds * 133)),
    logger,
  });
  const stopped = new Promise<number>((resolve) => {
    elector.run(
      () => {
        metrics.leading(true);
        // The informers' initial listing announces every existing object too.
        unwatch = store.watch((event) => {
          if (event.kind === 'mirror') mirrorQueue?.add(event.name);
          else if (event.kind === 'peer') peerQueue.add(event.name);
          else scriptQueue.add(event.name);
          // A changed peer or script changes the config of the mirrors naming
          // it: look at them now rather than at their next resync. (A peer's
          // Secret is not watched: the resync compares the config hash.)
          if (event.kind !== 'mirror') void requeueMirrorsUsing(event.kind, event.name);
        });
        void sweepForceDeleted();
        slotHealth.start();
        notices?.start();
      },
      // Lost the lease: stop at once, so the new leader is the only one acting.
      () => resolve(1),
    );
    process.once('SIGTERM', () => resolve(0));
    process.once('SIGINT', () => resolve(0));
  });
  const code = await stopped;
  metrics.leading(false);
  logger.info({ code }, 'operator stopping');
  unwatch?.();
  await slotHealth.stop();
  await notices?.stop();
  await notifier?.close();
  await mirrorQueue.stop();
  await peerQueue.stop();
  await scriptQueue.stop();
  await runtime.stopAll?.();
  await elector.stop();
  await pool.end();
  await metricsServer?.close();
  return code;
}

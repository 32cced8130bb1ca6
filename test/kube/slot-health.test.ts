// Slot health in cluster mode, against the real kube-apiserver and PostgreSQL:
// the slot health monitor reads a paused mirror's slot with its source peer's
// password from a Kubernetes Secret, the operator's metrics carry the mirror and
// the namespace, and the mirror controller turns the verdict into the Mirror's
// SlotHealthy condition and an Event when it turns bad.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import type pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresCatalog, SlotHealthMonitor } from '../../engine/src/index.ts';
import { reconcile } from '../../operator/src/controllers/controller.ts';
import { MirrorController } from '../../operator/src/controllers/mirror.ts';
import { group, version } from '../../operator/src/crds/schemas.ts';
import { EventRecorder } from '../../operator/src/events.ts';
import { KubeStore } from '../../operator/src/kube/kube-store.ts';
import { ReconcileStore } from '../../operator/src/kube/reconcile-store.ts';
import { OperatorMetrics } from '../../operator/src/operator-metrics.ts';
import { LocalProcessEngineRuntime } from '../../operator/src/runtime/local-process-runtime.ts';
import { createTestDatabase, droppablePool, randomSuffix, type TestDatabase } from '../support/databases.ts';
import { adminConfig, createNamespace, installCrds } from '../support/kube.ts';
import { catalogUrl } from '../support/operator-process.ts';
import { repoRoot } from '../support/testenv.ts';

interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
}

describe('slot health in cluster mode', () => {
  const config = adminConfig();
  const objects = config.makeApiClient(CustomObjectsApi);
  const core = config.makeApiClient(CoreV1Api);
  const logger = pino({ level: 'silent' });
  const workDir = mkdtempSync(join(tmpdir(), 'tributary-slot-health-'));
  const slotName = `tributary_slot_health_${randomSuffix()}`;
  let namespace = '';
  let source: TestDatabase;
  let destination: TestDatabase;
  let catalogDatabase: TestDatabase;
  let pool: pg.Pool;
  let catalog: PostgresCatalog;
  let runtime: LocalProcessEngineRuntime;
  const at = (plural: string) => ({ group, version, namespace, plural });

  async function applyPeer(name: string, database: TestDatabase) {
    const { password, ...relational } = database.config;
    await core.createNamespacedSecret({
      namespace,
      body: {
        metadata: {
          name: `${name}-secret`,
          labels: { 'tributary.dev/peer-secret': 'true' },
          annotations: { 'tributary.dev/peers': name },
        },
        stringData: { password },
      },
    });
    await objects.createNamespacedCustomObject({
      ...at('peers'),
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'Peer',
        metadata: { name },
        spec: { kind: 'relational', relational, secretRef: { name: `${name}-secret` } },
      },
    });
  }

  beforeAll(async () => {
    await installCrds(config);
    namespace = await createNamespace('slot-health');
    [source, destination, catalogDatabase] = await Promise.all([
      createTestDatabase('slk_src'),
      createTestDatabase('slk_dst'),
      createTestDatabase('slk_cat'),
    ]);
    await source.client.query(`CREATE TABLE items (id int PRIMARY KEY, v text)`);
    pool = droppablePool({ ...catalogDatabase.config, max: 2 });
    catalog = new PostgresCatalog(pool);
    await catalog.migrate();
    runtime = new LocalProcessEngineRuntime({
      catalog,
      catalogUrl: catalogUrl(catalogDatabase.config),
      logger,
      workDir,
      entryPoint: join(repoRoot, 'bin', 'tributary.ts'),
    });
    await applyPeer('source', source);
    await applyPeer('destination', destination);
  });

  afterAll(async () => {
    await runtime?.stopAll();
    await source?.client
      .query(`SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, [
        slotName,
      ])
      .catch(() => {});
    await pool?.end();
    await Promise.all([source?.drop(), destination?.drop(), catalogDatabase?.drop()]);
    rmSync(workDir, { recursive: true, force: true });
  });

  it('reads a paused mirror’s slot with the Secret’s password, and shows it as metrics and a condition', async () => {
    // A paused mirror whose slot exists (as its engine left it) and no engine runs.
    await source.client.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [slotName]);
    await objects.createNamespacedCustomObject({
      ...at('mirrors'),
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'Mirror',
        metadata: { name: 'paused' },
        spec: {
          sourcePeer: 'source',
          destinationPeer: 'destination',
          tableMappings: [
            {
              source: { schema: 'public', table: 'items' },
              destination: { schema: 'public', table: 'items' },
            },
          ],
          replicationSlotName: slotName,
          doInitialSnapshot: false,
          state: 'Paused',
        },
      },
    });
    // As its engine left it: set up (its slot recorded as created), then paused.
    await catalog.transition('paused', 'setup');
    await catalog.saveSourceSetup('paused', {
      slotName,
      publicationName: 'unused',
      publicationCreatedByMirror: true,
      slotCreatedByMirror: true,
      slotIdentity: null,
    });
    for (const phase of ['pausing', 'paused'] as const) await catalog.transition('paused', phase);

    const store = new KubeStore(config, namespace);
    const metrics = new OperatorMetrics({ namespace });
    const monitor = new SlotHealthMonitor({ store, catalog, logger, sink: metrics.slotHealth });
    const controller = new MirrorController({
      store,
      objects: new ReconcileStore(config, namespace),
      catalog,
      runtime,
      events: new EventRecorder(config, namespace, logger),
      logger,
      requeue: () => {},
    });
    const retained = async () => {
      const text = await metrics.registry.metrics();
      const line = text
        .split('\n')
        .find((candidate) => candidate.startsWith('tributary_mirror_slot_retained_wal_bytes{'));
      return { line, bytes: Number(line?.slice(line.lastIndexOf(' ') + 1)) };
    };
    const condition = async () => {
      const object = (await objects.getNamespacedCustomObject({ ...at('mirrors'), name: 'paused' })) as {
        status?: { conditions?: Condition[] };
      };
      return object.status?.conditions?.find((candidate) => candidate.type === 'SlotHealthy');
    };

    await monitor.check();
    const first = await retained();
    expect(first.line).toContain('mirror="paused"');
    expect(first.line).toContain(`namespace="${namespace}"`);
    expect((await catalog.getSlotHealth('paused'))?.reading?.active).toBe(false);

    // WAL written at the source while nothing reads the slot: it is retained.
    await source.client.query(
      `INSERT INTO items SELECT g, repeat('x', 200) FROM generate_series(1, 40000) g`,
    );
    await monitor.check();
    const grown = await retained();
    expect(grown.bytes - first.bytes).toBeGreaterThanOrEqual(8 * 1024 * 1024);

    await reconcile(controller, 'paused');
    expect(await condition()).toMatchObject({ status: 'True', reason: 'Healthy' });

    // The slot dropped behind the paused mirror: unhealthy, with an Event.
    await source.client.query(`SELECT pg_drop_replication_slot($1)`, [slotName]);
    await monitor.check();
    expect((await retained()).line).toBeUndefined();
    await reconcile(controller, 'paused');
    const missing = await condition();
    expect(missing).toMatchObject({ status: 'False', reason: 'SlotMissing' });
    expect(missing?.message).toContain(slotName);
    const events = (await core.listNamespacedEvent({ namespace })).items.filter(
      (event) => event.reason === 'SlotUnhealthy',
    );
    expect(events).toHaveLength(1);
    expect(events[0]?.message).toContain('does not exist');
    // A second resync with the same verdict records no second Event.
    await reconcile(controller, 'paused');
    expect(
      (await core.listNamespacedEvent({ namespace })).items.filter(
        (event) => event.reason === 'SlotUnhealthy',
      ),
    ).toHaveLength(1);
    await monitor.stop();
  });
});

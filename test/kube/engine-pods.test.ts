// The operator with its real engine runtime (StatefulSets) against the real
// kube-apiserver. No kubelet runs there, so no engine pod starts: the test
// writes pod objects and their status itself, as a kubelet would, and checks
// what the operator makes of them. Also: owner references, pod settings from
// the operator's defaults and the Mirror, and config changes rolling the pod.
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AppsV1Api, CoreV1Api, CustomObjectsApi, type V1ContainerStatus } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../api-server/src/index.ts';
import { checkMirrorSource, checkPeer, findMissingTables, PostgresCatalog } from '../../engine/src/index.ts';
import { group, version } from '../../operator/src/crds/schemas.ts';
import { KubeStore } from '../../operator/src/kube/kube-store.ts';
import {
  adminClient,
  createTestDatabase,
  droppablePool,
  randomSuffix,
  type TestDatabase,
  waitFor,
} from '../support/databases.ts';
import { freePort } from '../support/engine-process.ts';
import { basicAuth } from '../support/facade.ts';
import { adminConfig, createNamespace, installCrds, statusOf } from '../support/kube.ts';
import { exitOf, startOperator } from '../support/operator-process.ts';
import { startPrometheus, type TestPrometheus } from '../support/prometheus.ts';
import { postgres } from '../support/testenv.ts';

interface MirrorObject {
  metadata: { uid: string };
  status?: {
    errorMessage?: string;
    conditions?: { type: string; status: string; reason: string; message: string }[];
  };
}

describe('operator and its engine pods', () => {
  const config = adminConfig();
  const objects = config.makeApiClient(CustomObjectsApi);
  const core = config.makeApiClient(CoreV1Api);
  const apps = config.makeApiClient(AppsV1Api);
  let namespace = '';
  let source: TestDatabase;
  let catalogDatabase: TestDatabase;
  let pool: pg.Pool;
  let app: FastifyInstance;
  let operator: ChildProcess | undefined;
  const role = `pods_${randomSuffix()}`;
  const apiPassword = 'engine-pods-test';
  const at = (plural: string) => ({ group, version, namespace, plural });
  const engineName = 'tributary-engine-pods';
  let metricsPort = 0;
  /** One sample of the operator's /metrics, by its name and labels as printed. */
  const metric = async (port: number, sample: string): Promise<number | undefined> => {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const line = text.split('\n').find((candidate) => candidate.startsWith(`${sample} `));
    return line === undefined ? undefined : Number(line.slice(sample.length + 1));
  };

  const mirror = async () =>
    (await objects.getNamespacedCustomObject({ ...at('mirrors'), name: 'pods' })) as MirrorObject;
  const ready = async () =>
    (await mirror()).status?.conditions?.find((condition) => condition.type === 'Ready');
  const podTemplateHash = async () =>
    (await apps.readNamespacedStatefulSet({ name: engineName, namespace })).spec?.template.metadata
      ?.annotations?.['tributary.dev/config-hash'];
  const engineDocument = async () => {
    const secret = await core.readNamespacedSecret({ name: engineName, namespace });
    return JSON.parse(Buffer.from(secret.data?.['engine.json'] ?? '', 'base64').toString()) as {
      source: { password: string };
      script?: { source: string };
    };
  };

  // Engines as StatefulSets, with the engine pod defaults the chart passes.
  const startPodsOperator = () =>
    startOperator(namespace, catalogDatabase.config, 'pods-operator', 4, metricsPort, {
      engineRuntime: 'statefulset',
      env: {
        TRIBUTARY_ENGINE_IMAGE: 'registry.example/tributary:test',
        // What the chart passes from its `engine` values.
        TRIBUTARY_ENGINE_POD: JSON.stringify({
          resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '256Mi' } },
          nodeSelector: { disk: 'ssd' },
          labels: { team: 'data' },
          annotations: { 'example.com/owner': 'data' },
        }),
      },
    });

  beforeAll(async () => {
    await installCrds(config);
    namespace = await createNamespace('pods');
    [source, catalogDatabase] = await Promise.all([
      createTestDatabase('pods_src'),
      createTestDatabase('pods_cat'),
    ]);
    await source.client.query(`CREATE TABLE t (id int PRIMARY KEY)`);
    await source.client.query(
      `CREATE ROLE ${pg.escapeIdentifier(role)} LOGIN REPLICATION PASSWORD 'first-password'`,
    );
    // Pods name this ServiceAccount (a cluster with ServiceAccount admission wants it to exist).
    await core.createNamespacedServiceAccount({
      namespace,
      body: { metadata: { name: 'tributary-engine' } },
    });
    const { password: _password, ...relational } = source.config;
    for (const [peer, user, password] of [
      ['source', role, 'first-password'],
      ['destination', source.config.user, source.config.password],
    ] as const) {
      await core.createNamespacedSecret({
        namespace,
        body: {
          metadata: {
            name: `${peer}-secret`,
            labels: { 'tributary.dev/peer-secret': 'true' },
            annotations: { 'tributary.dev/peers': peer },
          },
          stringData: { password },
        },
      });
      await objects.createNamespacedCustomObject({
        ...at('peers'),
        body: {
          apiVersion: `${group}/${version}`,
          kind: 'Peer',
          metadata: { name: peer },
          spec: {
            kind: 'relational',
            relational: { ...relational, user },
            secretRef: { name: `${peer}-secret` },
          },
        },
      });
    }
    await objects.createNamespacedCustomObject({
      ...at('scripts'),
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'Script',
        metadata: { name: 'shape' },
        spec: { lang: 'lua', source: 'function onRecord(r) return r end' },
      },
    });
    pool = droppablePool({ ...catalogDatabase.config, max: 2 });
    const catalog = new PostgresCatalog(pool);
    app = buildApp({
      store: new KubeStore(config, namespace),
      catalog,
      checkPeer: (candidate) => checkPeer(candidate, 5_000),
      findMissingTables,
      checkMirrorSource,
      scriptsEnabled: true,
      auth: { mode: 'basic', password: apiPassword },
      logger: pino({ level: 'silent' }),
    });
    await objects.createNamespacedCustomObject({
      ...at('mirrors'),
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'Mirror',
        metadata: { name: 'pods' },
        spec: {
          sourcePeer: 'source',
          destinationPeer: 'destination',
          script: 'shape',
          tableMappings: [
            { source: { schema: 'public', table: 't' }, destination: { schema: 'public', table: 't_copy' } },
          ],
          doInitialSnapshot: true,
        },
      },
    });
    // The operator migrates the catalog before the facade is asked anything.
    metricsPort = await freePort();
    operator = startPodsOperator();
    await waitFor(
      async () => (await podTemplateHash().catch(() => undefined)) !== undefined,
      60_000,
      'the engine StatefulSet',
    );
  });

  afterAll(async () => {
    operator?.kill('SIGTERM');
    if (operator) await exitOf(operator);
    await app?.close();
    await pool?.end();
    await source?.client.query(`DROP ROLE IF EXISTS ${pg.escapeIdentifier(role)}`).catch(() => {});
    await Promise.all([source?.drop(), catalogDatabase?.drop()]);
  });

  // A Mirror's own spec.engine over these defaults is in workloads.test.ts: the
  // apiserver is shared with other checkouts whose tests install older CRDs,
  // which prune that field from stored Mirrors.
  it("owns the engine StatefulSet and Secret by the Mirror and builds the pod from the operator's pod settings", async () => {
    const { uid } = (await mirror()).metadata;
    const owner = [
      {
        apiVersion: `${group}/${version}`,
        kind: 'Mirror',
        name: 'pods',
        uid,
        controller: true,
        blockOwnerDeletion: true,
      },
    ];
    const set = await apps.readNamespacedStatefulSet({ name: engineName, namespace });
    const secret = await core.readNamespacedSecret({ name: engineName, namespace });
    expect(set.metadata?.ownerReferences?.map((reference) => ({ ...reference }))).toEqual(owner);
    expect(secret.metadata?.ownerReferences?.map((reference) => ({ ...reference }))).toEqual(owner);
    expect(secret.metadata?.finalizers).toEqual(['tributary.dev/teardown']);
    const template = set.spec?.template;
    const pod = template?.spec;
    expect(pod?.containers[0]?.image).toBe('registry.example/tributary:test');
    expect(pod?.containers[0]?.resources).toEqual({
      requests: { cpu: '100m', memory: '128Mi' },
      limits: { memory: '256Mi' },
    });
    expect(pod?.nodeSelector).toEqual({ disk: 'ssd' });
    // The heap follows the memory limit (three quarters of 256Mi).
    expect(pod?.containers[0]?.env).toContainEqual({
      name: 'NODE_OPTIONS',
      value: '--max-old-space-size=192',
    });
    expect(template?.metadata?.labels).toMatchObject({ team: 'data', 'tributary.dev/mirror': 'pods' });
    expect(template?.metadata?.annotations).toMatchObject({ 'example.com/owner': 'data' });

    // Nothing changed, nothing rolls: after more reconciles the StatefulSet is as it was.
    const reconciles = () =>
      metric(metricsPort, 'tributary_operator_reconciles_total{kind="mirror",result="ok"}');
    const before = (await reconciles()) ?? 0;
    await waitFor(async () => ((await reconciles()) ?? 0) >= before + 2, 40_000, 'two more reconciles');
    const after = await apps.readNamespacedStatefulSet({ name: engineName, namespace });
    expect(after.metadata?.generation).toBe(set.metadata?.generation);
  });

  it("rolls the engine when a peer's password changes in its Secret and when the script is edited", async () => {
    const firstHash = await podTemplateHash();
    expect((await engineDocument()).source.password).toBe('first-password');
    await source.client.query(`ALTER ROLE ${pg.escapeIdentifier(role)} PASSWORD 'second-password'`);
    await core.replaceNamespacedSecret({
      name: 'source-secret',
      namespace,
      body: {
        metadata: {
          name: 'source-secret',
          labels: { 'tributary.dev/peer-secret': 'true' },
          annotations: { 'tributary.dev/peers': 'source' },
        },
        stringData: { password: 'second-password' },
      },
    });
    // Secrets are not watched: the next resync (10 s) sees the new config.
    await waitFor(async () => (await podTemplateHash()) !== firstHash, 40_000, 'the pod template to change');
    expect((await engineDocument()).source.password).toBe('second-password');

    const secondHash = await podTemplateHash();
    await objects.patchNamespacedCustomObject({
      ...at('scripts'),
      name: 'shape',
      body: [
        { op: 'replace', path: '/spec/source', value: 'function onRecord(r) r.edited = true return r end' },
      ],
    });
    await waitFor(
      async () => (await podTemplateHash()) !== secondHash,
      40_000,
      'the pod template to change again',
    );
    expect((await engineDocument()).script?.source).toContain('r.edited = true');
  });

  it('shows a crash-looping, OOM-killed engine pod in the conditions, an Event, the logs, the API and an alert', async () => {
    const podName = `${engineName}-0`;
    // The chart's rules in a real Prometheus scraping this operator: TributaryEnginePodFailing fires from what it exports.
    const prometheus = await startPrometheus(
      mkdtempSync(join(tmpdir(), 'tributary-pod-alerts-')),
      [`127.0.0.1:${metricsPort}`],
      { TributaryEnginePodFailing: { for: '0s' } },
    );
    try {
      await podProblemShown(podName, prometheus);
    } finally {
      await prometheus.stop();
    }
  });

  const podProblemShown = async (podName: string, prometheus: TestPrometheus) => {
    expect(await prometheus.firing('TributaryEnginePodFailing')).toBe(false);
    await core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name: podName, labels: { 'tributary.dev/mirror': 'pods' } },
        spec: {
          serviceAccountName: 'tributary-engine',
          containers: [{ name: 'engine', image: 'registry.example/tributary:test' }],
        },
      },
    });
    // What a kubelet writes: the container's state and its last termination.
    const setContainerStatus = async (status: Partial<V1ContainerStatus>, phase = 'Running') => {
      const pod = await core.readNamespacedPod({ name: podName, namespace });
      pod.status = {
        phase,
        containerStatuses: [
          {
            name: 'engine',
            image: 'registry.example/tributary:test',
            imageID: '',
            ready: false,
            restartCount: 0,
            ...status,
          },
        ],
      };
      await core.replaceNamespacedPodStatus({ name: podName, namespace, body: pod });
    };
    const apiErrorMessage = async () => {
      const response = await app.inject({
        method: 'POST',
        url: '/api/v1/mirrors/status',
        payload: { flowJobName: 'pods' },
        headers: { authorization: basicAuth('', apiPassword) },
      });
      return (response.json() as { errorMessage: string }).errorMessage;
    };

    await setContainerStatus({
      restartCount: 5,
      state: {
        waiting: { reason: 'CrashLoopBackOff', message: 'back-off 2m40s restarting failed container=engine' },
      },
      lastState: {
        terminated: {
          exitCode: 137,
          reason: 'OOMKilled',
          message: 'FATAL ERROR: Reached heap limit Allocation failed',
        },
      },
    });
    await waitFor(async () => (await ready())?.reason === 'OOMKilled', 40_000, 'the OOMKilled condition');
    const condition = await ready();
    expect(condition?.status).toBe('False');
    expect(condition?.message).toContain('CrashLoopBackOff');
    expect(condition?.message).toContain('OOMKilled (exit code 137): FATAL ERROR: Reached heap limit');
    expect((await mirror()).status?.errorMessage).toContain('Reached heap limit');
    // The Event is recorded after the status that carries the condition: wait for it too.
    const oomEvents = async () =>
      (await core.listNamespacedEvent({ namespace })).items.filter(
        (event) => event.involvedObject.name === 'pods' && event.reason === 'OOMKilled',
      );
    await waitFor(async () => (await oomEvents()).length > 0, 30_000, 'the OOMKilled Event');
    const events = await oomEvents();
    expect(events).toHaveLength(1);
    expect(events[0]?.type).toBe('Warning');
    const logs = await pool.query<{ message: string }>(
      `SELECT message FROM tributary.logs WHERE mirror = 'pods' AND level = 'ERROR'`,
    );
    expect(logs.rows.some((row) => row.message.includes('Reached heap limit'))).toBe(true);
    expect(await apiErrorMessage()).toContain('Reached heap limit');
    // And in Prometheus, for the TributaryEnginePodFailing alert.
    expect(
      await metric(metricsPort, 'tributary_operator_engine_pod_problem{mirror="pods",reason="OOMKilled"}'),
    ).toBe(1);
    await prometheus.waitFiring('TributaryEnginePodFailing', 'pods', 60_000);
    expect(
      (await prometheus.alerts()).find((alert) => alert.labels.alertname === 'TributaryEnginePodFailing')
        ?.labels.reason,
    ).toBe('OOMKilled');

    // An image the node does not have (imagePullPolicy Never): another cause, another Event.
    await setContainerStatus(
      {
        state: {
          waiting: {
            reason: 'ErrImageNeverPull',
            message:
              'Container image "registry.example/tributary:test" is not present with pull policy of Never',
          },
        },
      },
      'Pending',
    );
    await waitFor(async () => (await ready())?.reason === 'ErrImageNeverPull', 40_000, 'ErrImageNeverPull');
    expect(await apiErrorMessage()).toContain('is not present with pull policy of Never');

    // Running again: the problem is gone from the status and the API.
    await setContainerStatus({ ready: true, state: { running: { startedAt: new Date() } } });
    await waitFor(
      async () => (await ready())?.reason !== 'ErrImageNeverPull',
      40_000,
      'the problem to clear',
    );
    expect((await mirror()).status?.errorMessage).toBe('');
    expect(await apiErrorMessage()).toBe('');
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(metrics).not.toMatch(/^tributary_operator_engine_pod_problem\{/m);
    await waitFor(
      async () => !(await prometheus.firing('TributaryEnginePodFailing')),
      60_000,
      'TributaryEnginePodFailing resolved',
    );
  };

  it('counts the reconciles that fail while the catalog refuses connections, and TributaryOperatorReconcileErrors fires', async () => {
    const prometheus = await startPrometheus(
      mkdtempSync(join(tmpdir(), 'tributary-reconcile-alerts-')),
      [`127.0.0.1:${metricsPort}`],
      { TributaryOperatorReconcileErrors: { for: '0s' } },
    );
    const catalogName = pg.escapeIdentifier(catalogDatabase.name);
    const failed = async () =>
      (await metric(metricsPort, 'tributary_operator_reconciles_total{kind="mirror",result="error"}')) ?? 0;
    // On the server's maintenance database: a database cannot close itself to connections.
    const admin = adminClient(postgres, 'postgres');
    await admin.connect();
    try {
      expect(await prometheus.firing('TributaryOperatorReconcileErrors')).toBe(false);
      const before = await failed();
      // The catalog goes away under the operator: new connections refused, open ones ended
      // (but the test's own client, which drops the database at the end).
      await admin.query(`ALTER DATABASE ${catalogName} ALLOW_CONNECTIONS false`);
      const own = (await catalogDatabase.client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid'))
        .rows[0]?.pid;
      await admin.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> $2`,
        [catalogDatabase.name, own],
      );
      try {
        // A change of the Mirror makes the operator reconcile it (and retry with backoff).
        await objects.patchNamespacedCustomObject({
          ...at('mirrors'),
          name: 'pods',
          body: [{ op: 'add', path: '/metadata/annotations', value: { 'test.tributary.dev/poke': '1' } }],
        });
        await waitFor(async () => (await failed()) > before, 60_000, 'a failed mirror reconcile');
        await prometheus.waitFiring('TributaryOperatorReconcileErrors', undefined, 60_000);
        expect(
          (await prometheus.alerts()).find(
            (alert) => alert.labels.alertname === 'TributaryOperatorReconcileErrors',
          )?.labels.kind,
        ).toBe('mirror');
      } finally {
        await admin.query(`ALTER DATABASE ${catalogName} ALLOW_CONNECTIONS true`);
      }
      // Back: the reconciles succeed again.
      const ok = async () =>
        (await metric(metricsPort, 'tributary_operator_reconciles_total{kind="mirror",result="ok"}')) ?? 0;
      const okBefore = await ok();
      await objects.patchNamespacedCustomObject({
        ...at('mirrors'),
        name: 'pods',
        body: [{ op: 'replace', path: '/metadata/annotations/test.tributary.dev~1poke', value: '2' }],
      });
      await waitFor(async () => (await ok()) > okBefore, 60_000, 'a mirror reconcile that succeeds');
    } finally {
      await admin.end();
      await prometheus.stop();
    }
  });

  it('releases the engine Secret of a Mirror force-deleted while no operator ran', async () => {
    // The engine ran once: the catalog knows the mirror.
    await new PostgresCatalog(pool).transition('pods', 'setup');
    operator?.kill('SIGTERM');
    if (operator) await exitOf(operator);
    operator = undefined;
    // A force delete: finalizers removed by hand, then the object deleted.
    await objects.patchNamespacedCustomObject({
      ...at('mirrors'),
      name: 'pods',
      body: [{ op: 'replace', path: '/metadata/finalizers', value: [] }],
    });
    await objects.deleteNamespacedCustomObject({ ...at('mirrors'), name: 'pods' });
    // What garbage collection does to the dependents (no controller-manager runs here).
    await core.deleteNamespacedSecret({ name: engineName, namespace });
    const terminating = await core.readNamespacedSecret({ name: engineName, namespace });
    expect(terminating.metadata?.deletionTimestamp).toBeDefined();

    operator = startPodsOperator();
    await waitFor(
      async () => (await statusOf(core.readNamespacedSecret({ name: engineName, namespace }))).code === 404,
      40_000,
      'the engine Secret to go',
    );
    expect((await statusOf(apps.readNamespacedStatefulSet({ name: engineName, namespace }))).code).toBe(404);
  });
});

// The /api/v1 facade in cluster mode: it writes custom resources and Secrets,
// the operator (a separate process) reconciles them, status comes back through
// the catalog. The same calls as standalone mode, against the real apiserver.
import type { ChildProcess } from 'node:child_process';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import type pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../api-server/src/index.ts';
import { checkMirrorSource, checkPeer, findMissingTables, PostgresCatalog } from '../../engine/src/index.ts';
import { group, version } from '../../operator/src/crds/schemas.ts';
import { KubeStore } from '../../operator/src/kube/kube-store.ts';
import { kubeObjectName } from '../../operator/src/kube/object-names.ts';
import {
  createTestDatabase,
  droppablePool,
  type TestDatabase,
  waitFor,
  waitForSameRows,
} from '../support/databases.ts';
import { basicAuth } from '../support/facade.ts';
import { adminConfig, createNamespace, installCrds, kubectl } from '../support/kube.ts';
import { exitOf, startOperator } from '../support/operator-process.ts';

const password = 'cluster-facade-password';

describe('facade in cluster mode', () => {
  const config = adminConfig();
  let namespace = '';
  let app: FastifyInstance;
  let pool: pg.Pool;
  let operator: ChildProcess | undefined;
  let source: TestDatabase;
  let destination: TestDatabase;
  let catalogDatabase: TestDatabase;

  const post = async (url: string, body: unknown) => {
    const response = await app.inject({
      method: 'POST',
      url,
      payload: body as object,
      headers: { authorization: basicAuth('', password) },
    });
    return { status: response.statusCode, body: response.json() as Record<string, unknown> };
  };
  const state = async (name: string) =>
    (await post('/api/v1/mirrors/status', { flowJobName: name })).body.currentFlowState;
  const peer = (name: string, database: TestDatabase) => {
    const { host, port, user, password: secret, database: db } = database.config;
    return {
      peer: { name, type: 3, relational_config: { host, port, user, password: secret, database: db } },
    };
  };

  beforeAll(async () => {
    await installCrds(config);
    namespace = await createNamespace('facade');
    [source, destination, catalogDatabase] = await Promise.all([
      createTestDatabase('cf_src'),
      createTestDatabase('cf_dst'),
      createTestDatabase('cf_cat'),
    ]);
    await source.client.query(`CREATE TABLE things (id int PRIMARY KEY, v text)`);
    await source.client.query(`INSERT INTO things SELECT g, 'v' || g FROM generate_series(1, 200) g`);
    await source.client.query(`CREATE TABLE others (id int PRIMARY KEY)`);
    await source.client.query(`INSERT INTO others SELECT generate_series(1, 30)`);
    pool = droppablePool({ ...catalogDatabase.config, max: 4 });
    const catalog = new PostgresCatalog(pool);
    await catalog.migrate();
    app = buildApp({
      store: new KubeStore(config, namespace),
      catalog,
      checkPeer: (candidate) => checkPeer(candidate, 5_000),
      findMissingTables,
      checkMirrorSource,
      scriptsEnabled: true,
      auth: { mode: 'basic', password },
      logger: pino({ level: 'silent' }),
    });
    await app.ready();
    operator = startOperator(namespace, catalogDatabase.config, 'facade-operator');
  });

  afterAll(async () => {
    operator?.kill('SIGTERM');
    if (operator) await exitOf(operator);
    await app?.close();
    await pool?.end();
    await Promise.all([source?.drop(), destination?.drop(), catalogDatabase?.drop()]);
  });

  it('stores peers as resources with their secrets in Secrets', async () => {
    expect(await post('/api/v1/peers/create', peer('pg_src', source))).toMatchObject({
      status: 200,
      body: { status: 'CREATED' },
    });
    expect(await post('/api/v1/peers/create', peer('pg_dst', destination))).toMatchObject({ status: 200 });
    const objects = config.makeApiClient(CustomObjectsApi);
    const stored = (await objects.getNamespacedCustomObject({
      group,
      version,
      namespace,
      plural: 'peers',
      name: kubeObjectName('pg_src'),
    })) as {
      spec: Record<string, unknown>;
    };
    expect(JSON.stringify(stored.spec)).not.toContain(source.config.password);
    const secret = await config
      .makeApiClient(CoreV1Api)
      .readNamespacedSecret({ name: `tributary-peer-${kubeObjectName('pg_src')}`, namespace });
    expect(Buffer.from(secret.data?.password ?? '', 'base64').toString()).toBe(source.config.password);
    const info = await app.inject({
      method: 'GET',
      url: '/api/v1/peers/info/pg_src',
      headers: { authorization: basicAuth('', password) },
    });
    expect(info.json()).toMatchObject({
      peer: { type: 'RELATIONAL', relationalConfig: { password: '********' } },
    });
  });

  const sameRows = (table: string) => waitForSameRows(source.client, destination.client, table);

  // A name of the original interface's rule: its object name is derived (kube/object-names.ts).
  const mirrorName = 'pg_things';

  it('creates, pauses, edits, resumes and drops a mirror through the operator', async () => {
    const created = await post('/api/v1/flows/cdc/create', {
      connection_configs: {
        flow_job_name: mirrorName,
        source_name: 'pg_src',
        destination_name: 'pg_dst',
        table_mappings: [
          { source_table_identifier: 'public.things', destination_table_identifier: 'public.things' },
        ],
        do_initial_snapshot: true,
        idle_timeout_seconds: 1,
      },
    });
    expect(created.status).toBe(200);
    expect(String(created.body.workflowId)).toMatch(/^pg_things-/);
    await waitFor(async () => (await state(mirrorName)) === 'STATUS_RUNNING', 60_000, 'running');
    await source.client.query(`INSERT INTO things VALUES (201, 'new')`);
    await sameRows('things');
    expect(
      await post('/api/v1/mirrors/state_change', { flowJobName: mirrorName, requestedFlowState: 2 }),
    ).toMatchObject({
      body: { ok: true },
    });
    await waitFor(async () => (await state(mirrorName)) === 'STATUS_PAUSED', 60_000, 'paused');
    await source.client.query(`INSERT INTO things VALUES (202, 'while paused')`);
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect((await destination.client.query(`SELECT 1 FROM things WHERE id = 202`)).rowCount).toBe(0);
    // The edit becomes a spec change of the Mirror object, which the operator applies.
    const edited = await post('/api/v1/mirrors/state_change', {
      flowJobName: mirrorName,
      requestedFlowState: 'STATUS_RUNNING',
      flowConfigUpdate: {
        cdcFlowConfigUpdate: {
          additional_tables: [
            { sourceTableIdentifier: 'public.others', destinationTableIdentifier: 'public.others' },
          ],
        },
      },
    });
    expect(edited).toMatchObject({ status: 200 });
    const mirror = (await config.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
      group,
      version,
      namespace,
      plural: 'mirrors',
      name: kubeObjectName(mirrorName),
    })) as { spec: { state: string; tableMappings: { source: { table: string } }[] } };
    expect(mirror.spec.state).toBe('Running');
    expect(mirror.spec.tableMappings.map((m) => m.source.table)).toEqual(['things', 'others']);
    await waitFor(async () => (await state(mirrorName)) === 'STATUS_RUNNING', 60_000, 'resumed');
    await sameRows('things');
    await sameRows('others');
    const batches = await post('/api/v1/mirrors/cdc/batches', { flowJobName: mirrorName, limit: 0 });
    expect(Number(batches.body.total)).toBeGreaterThan(0);
    await post('/api/v1/mirrors/state_change', {
      flowJobName: mirrorName,
      requestedFlowState: 'STATUS_TERMINATING',
    });
    await waitFor(async () => (await state(mirrorName)) === 'STATUS_TERMINATED', 60_000, 'terminated');
    const slots = await source.client.query(`SELECT 1 FROM pg_replication_slots WHERE database = $1`, [
      source.name,
    ]);
    expect(slots.rowCount).toBe(0);
    const logs = await post('/api/v1/mirrors/logs', { flowJobName: mirrorName, numPerPage: 50 });
    expect(JSON.stringify(logs.body.errors)).toContain('mirror dropped');
  });

  it('refuses names beyond the name rule with a 400 as standalone mode does, creating nothing', async () => {
    const refused = await post('/api/v1/peers/create', peer('Under_Score', source));
    expect(refused).toEqual({
      status: 400,
      body: { status: 'FAILED', message: expect.stringContaining('peer.name: ') },
    });
    const script = await post('/api/v1/scripts', {
      script: { id: -1, name: 'Bad Name', lang: 'lua', source: '' },
    });
    expect(script.status).toBe(400);
    expect(script.body).toMatchObject({ code: 3 });
    const objects = config.makeApiClient(CustomObjectsApi);
    const scripts = (await objects.listNamespacedCustomObject({
      group,
      version,
      namespace,
      plural: 'scripts',
    })) as {
      items: unknown[];
    };
    expect(scripts.items).toEqual([]);
  });

  it('answers 409 naming the Secret when a peer applied with kubectl has none', async () => {
    await config.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      group,
      version,
      namespace,
      plural: 'peers',
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'Peer',
        metadata: { name: 'secretless' },
        spec: {
          kind: 'relational',
          relational: { host: '127.0.0.1', port: 5432, user: 'u', database: 'd' },
          secretRef: { name: 'not-there' },
        },
      },
    });
    const info = await app.inject({
      method: 'GET',
      url: '/api/v1/peers/info/secretless',
      headers: { authorization: basicAuth('', password) },
    });
    expect(info.statusCode).toBe(409);
    expect(info.json()).toMatchObject({
      code: 9,
      message: expect.stringContaining('Secret not-there not found'),
    });
  });

  it('answers 409 naming the Secret and the label when a peer names a Secret not labelled for peers', async () => {
    await config.makeApiClient(CoreV1Api).createNamespacedSecret({
      namespace,
      body: { metadata: { name: 'someone-elses' }, stringData: { password: 'someone-elses-password' } },
    });
    await config.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      group,
      version,
      namespace,
      plural: 'peers',
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'Peer',
        metadata: { name: 'borrower' },
        spec: {
          kind: 'relational',
          relational: { host: '127.0.0.1', port: 5432, user: 'u', database: 'd' },
          secretRef: { name: 'someone-elses' },
        },
      },
    });
    const info = await app.inject({
      method: 'GET',
      url: '/api/v1/peers/info/borrower',
      headers: { authorization: basicAuth('', password) },
    });
    expect(info.statusCode).toBe(409);
    expect(info.json()).toMatchObject({
      code: 9,
      message: expect.stringMatching(/Secret someone-elses lacks the label tributary\.dev\/peer-secret/),
    });
    expect(info.body).not.toContain('someone-elses-password');
  });

  it('gives scripts numeric ids', async () => {
    const created = await post('/api/v1/scripts', {
      script: { id: -1, name: 'renamer', lang: 'lua', source: 'return 1' },
    });
    // The operator of this namespace may draw an id for the new Script while
    // the facade does: the id drawn second is then skipped, so the first
    // script's id is 1 or 2 (docs/architecture.md, Scripts).
    const { id } = created.body as { id: number };
    expect([1, 2]).toContain(id);
    const read = await app.inject({
      method: 'GET',
      url: `/api/v1/scripts/${id}`,
      headers: { authorization: basicAuth('', password) },
    });
    expect(read.json()).toEqual({ scripts: [{ id, name: 'renamer', lang: 'lua', source: 'return 1' }] });
  });

  it('gives a Script applied with kubectl its id, and never one id twice under concurrent writers', async () => {
    const objects = config.makeApiClient(CustomObjectsApi);
    const scriptObject = (name: string) => ({
      apiVersion: `${group}/${version}`,
      kind: 'Script',
      metadata: { name },
      spec: { lang: 'lua', source: `return "${name}"` },
    });
    await kubectl(['apply', '--namespace', namespace, '-f', '-'], JSON.stringify(scriptObject('applied')));
    const idOf = async (name: string) =>
      (
        (await objects.getNamespacedCustomObject({ group, version, namespace, plural: 'scripts', name })) as {
          status?: { id?: number };
        }
      ).status?.id;
    await waitFor(async () => (await idOf('applied')) !== undefined, 30_000, 'the operator to give an id');
    const listed = await app.inject({
      method: 'GET',
      url: '/api/v1/scripts/-1',
      headers: { authorization: basicAuth('', password) },
    });
    expect(listed.json().scripts).toContainEqual({
      id: await idOf('applied'),
      name: 'applied',
      lang: 'lua',
      source: 'return "applied"',
    });

    // Two facade replicas creating through the API while kubectl-applied
    // scripts wait for the operator: every id is handed out once.
    const replicas = [new KubeStore(config, namespace), new KubeStore(config, namespace)];
    const created = await Promise.all([
      ...Array.from({ length: 6 }, (_, i) =>
        replicas[i % 2]?.createScript({ name: `concurrent-${i}`, lang: 'lua', source: 'return 1' }),
      ),
      ...Array.from({ length: 3 }, (_, i) =>
        objects.createNamespacedCustomObject({
          group,
          version,
          namespace,
          plural: 'scripts',
          body: scriptObject(`applied-${i}`),
        }),
      ),
    ]);
    expect(created).toHaveLength(9);
    await waitFor(
      async () =>
        (await Promise.all([0, 1, 2].map((i) => idOf(`applied-${i}`)))).every((id) => id !== undefined),
      30_000,
      'ids for the applied scripts',
    );
    const ids = (await replicas[0]?.listScripts())?.map((script) => script.id) ?? [];
    expect(ids).toHaveLength(11);
    expect(new Set(ids).size).toBe(ids.length);
  });
});

// The operator's controllers (operator/src/controllers/) against the real
// kube-apiserver and PostgreSQL, engines as local processes: each reconcile
// reads its object once, and a status write made from a stale read is redone
// from a fresh one instead of overwriting what another writer wrote meanwhile.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import type pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresCatalog } from '../../engine/src/index.ts';
import { setCondition } from '../../operator/src/conditions.ts';
import { reconcile } from '../../operator/src/controllers/controller.ts';
import { MirrorController } from '../../operator/src/controllers/mirror.ts';
import { PeerController } from '../../operator/src/controllers/peer.ts';
import { ScriptController } from '../../operator/src/controllers/script.ts';
import { group, version } from '../../operator/src/crds/schemas.ts';
import { EventRecorder } from '../../operator/src/events.ts';
import { KubeStore } from '../../operator/src/kube/kube-store.ts';
import { ReconcileStore, type StoredStatus } from '../../operator/src/kube/reconcile-store.ts';
import { LocalProcessEngineRuntime } from '../../operator/src/runtime/local-process-runtime.ts';
import {
  createTestDatabase,
  droppablePool,
  type TestDatabase,
  waitFor,
  waitForSameRows,
} from '../support/databases.ts';
import { adminConfig, createNamespace, installCrds } from '../support/kube.ts';
import { catalogUrl } from '../support/operator-process.ts';
import { repoRoot } from '../support/testenv.ts';

interface Condition {
  type: string;
  status: string;
  reason: string;
  message?: string;
}

interface StoredObject {
  metadata: { finalizers?: string[] };
  status?: {
    phase?: string;
    id?: number;
    failedGeneration?: number;
    conditions?: Condition[];
    tables?: Record<string, unknown>[];
  };
}

/** `store` with a count of the calls of each of its methods, in `calls`. */
function counting<Store extends object>(store: Store, calls = new Map<string, number>()): Store {
  return new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      // Bound to the store itself: its private fields are not the proxy's.
      return (...args: unknown[]) => {
        calls.set(String(property), (calls.get(String(property)) ?? 0) + 1);
        return value.apply(target, args);
      };
    },
  });
}

/** The calls one reconcile made, by method, reads of each kind together. */
function readsOf(calls: Map<string, number>) {
  const count = (method: string) => calls.get(method) ?? 0;
  return {
    mirror: count('readMirror') + count('getMirror') + count('listMirrors'),
    peer: count('readPeer') + count('getPeer') + count('listPeers'),
    script: count('readScript') + count('getScript') + count('getScriptByName') + count('listScripts'),
  };
}

describe('controllers', () => {
  const config = adminConfig();
  const objects = config.makeApiClient(CustomObjectsApi);
  const core = config.makeApiClient(CoreV1Api);
  const logger = pino({ level: 'silent' });
  const workDir = mkdtempSync(join(tmpdir(), 'tributary-controllers-'));
  let namespace = '';
  let source: TestDatabase;
  let destination: TestDatabase;
  let catalogDatabase: TestDatabase;
  let pool: pg.Pool;
  let catalog: PostgresCatalog;
  let store: KubeStore;
  let reconcileStore: ReconcileStore;
  let runtime: LocalProcessEngineRuntime;
  const at = (plural: string) => ({ group, version, namespace, plural });
  const read = async (plural: string, name: string) =>
    (await objects.getNamespacedCustomObject({ ...at(plural), name })) as StoredObject;

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

  async function applyMirror(name: string, spec: Record<string, unknown> = {}) {
    await objects.createNamespacedCustomObject({
      ...at('mirrors'),
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'Mirror',
        metadata: { name },
        spec: {
          sourcePeer: 'source',
          destinationPeer: 'destination',
          tableMappings: [
            {
              source: { schema: 'public', table: 'items' },
              destination: { schema: 'public', table: 'items' },
            },
          ],
          doInitialSnapshot: true,
          idleTimeoutSeconds: 1,
          ...spec,
        },
      },
    });
  }

  /** A mirror controller over a store that counts what it is asked. */
  function mirrorController() {
    // The facade's store and the controllers' reads counted together: one read of each object.
    const calls = new Map<string, number>();
    const controller = new MirrorController({
      store: counting(store, calls),
      objects: counting(reconcileStore, calls),
      catalog,
      runtime,
      events: new EventRecorder(config, namespace, logger),
      logger,
      requeue: () => {},
    });
    return { controller, calls };
  }

  beforeAll(async () => {
    await installCrds(config);
    namespace = await createNamespace('controllers');
    [source, destination, catalogDatabase] = await Promise.all([
      createTestDatabase('ctl_src'),
      createTestDatabase('ctl_dst'),
      createTestDatabase('ctl_cat'),
    ]);
    await source.client.query(`CREATE TABLE items (id int PRIMARY KEY, v text)`);
    await source.client.query(`INSERT INTO items SELECT g, 'v' || g FROM generate_series(1, 100) g`);
    pool = droppablePool({ ...catalogDatabase.config, max: 2 });
    catalog = new PostgresCatalog(pool);
    await catalog.migrate();
    store = new KubeStore(config, namespace);
    reconcileStore = new ReconcileStore(config, namespace);
    runtime = new LocalProcessEngineRuntime({
      catalog,
      catalogUrl: catalogUrl(catalogDatabase.config),
      logger,
      workDir,
      entryPoint: join(repoRoot, 'bin', 'tributary.ts'),
    });
  });

  afterAll(async () => {
    await runtime?.stopAll();
    await pool?.end();
    await Promise.all([source?.drop(), destination?.drop(), catalogDatabase?.drop()]);
    rmSync(workDir, { recursive: true, force: true });
  });

  it('reads a Mirror once per reconcile: waiting, starting, running, paused and deleted', async () => {
    await applyMirror('items');
    const reconcileOnce = async () => {
      const { controller, calls } = mirrorController();
      await reconcile(controller, 'items');
      return readsOf(calls);
    };

    // Applied before its peers: it waits for them, with the finalizer added.
    expect((await reconcileOnce()).mirror).toBe(1);
    const waiting = await read('mirrors', 'items');
    expect(waiting.metadata.finalizers).toContain('tributary.dev/teardown');
    expect(waiting.status?.conditions?.find((c) => c.type === 'Ready')?.reason).toBe('WaitingForPeer');

    await applyPeer('source', source);
    await applyPeer('destination', destination);
    // Starts its engine: the Mirror once, each of its two peers once.
    expect(await reconcileOnce()).toEqual({ mirror: 1, peer: 2, script: 0 });
    await waitForSameRows(source.client, destination.client, 'items');
    await waitFor(async () => (await catalog.getRuntime('items'))?.phase === 'running', 60_000, 'running');
    // A resync of a running mirror.
    expect(await reconcileOnce()).toEqual({ mirror: 1, peer: 2, script: 0 });
    expect((await read('mirrors', 'items')).status?.phase).toBe('STATUS_RUNNING');
    // The table loaded and streams; CDC's rows by operation reach status.tables
    // (which the API server checks against the CRD's schema).
    await source.client.query(`INSERT INTO items VALUES (101, 'a'), (102, 'b')`);
    await source.client.query(`UPDATE items SET v = 'c' WHERE id = 1`);
    await source.client.query(`DELETE FROM items WHERE id = 2`);
    await waitFor(
      async () => (await catalog.listTables('items'))[0]?.deletes === 1n,
      60_000,
      'the delete applied',
    );
    await reconcileOnce();
    expect((await read('mirrors', 'items')).status?.tables).toEqual([
      {
        sourceTableIdentifier: 'public.items',
        destinationTableIdentifier: 'public.items',
        state: 'TABLE_STATE_STREAMING',
        stateSince: expect.stringMatching(/Z$/),
        rowsApplied: { inserts: '2', updates: '1', deletes: '1' },
        lastAppliedLsn: expect.stringMatching(/^[1-9]\d*$/),
        lastCommitTime: expect.stringMatching(/Z$/),
      },
    ]);
    // A table that stops (moved through the catalog as the flow that isolates a
    // table's fault will move it) shows its error and position, with a Warning Event.
    await catalog.transitionTable('items', {
      sourceTable: 'public.items',
      destinationTable: 'public.items',
      to: 'errored',
      problem: { kind: 'destination_write', message: 'a value was refused', remedy: 'fix the column' },
      behindLsn: 4242n,
    });
    await reconcileOnce();
    expect((await read('mirrors', 'items')).status?.tables?.[0]).toMatchObject({
      state: 'TABLE_STATE_ERRORED',
      error: { kind: 'destination_write', message: 'a value was refused', remedy: 'fix the column' },
      behindLsn: '4242',
    });
    const tableEvents = (await core.listNamespacedEvent({ namespace })).items.filter(
      (event) => event.involvedObject.name === 'items' && event.reason === 'TableStateChanged',
    );
    expect(tableEvents.map((event) => [event.type, event.message])).toEqual([
      ['Warning', 'public.items: TABLE_STATE_STREAMING -> TABLE_STATE_ERRORED: a value was refused'],
    ]);

    await objects.patchNamespacedCustomObject({
      ...at('mirrors'),
      name: 'items',
      body: [{ op: 'replace', path: '/spec/state', value: 'Paused' }],
    });
    expect((await reconcileOnce()).mirror).toBe(1);
    expect((await read('mirrors', 'items')).status?.phase).toBe('STATUS_PAUSED');

    // Deleted: the teardown drops the slot, then the finalizer, and the object goes.
    await objects.deleteNamespacedCustomObject({ ...at('mirrors'), name: 'items' });
    expect((await reconcileOnce()).mirror).toBe(1);
    const slots = await source.client.query(`SELECT 1 FROM pg_replication_slots WHERE database = $1`, [
      source.name,
    ]);
    expect(slots.rowCount).toBe(0);
    await waitFor(
      async () =>
        (await objects
          .getNamespacedCustomObject({ ...at('mirrors'), name: 'items' })
          .catch(() => undefined)) === undefined,
      10_000,
      'mirror object gone',
    );
  });

  it('reads a Peer and a Script once per reconcile', async () => {
    await applyPeer('checked', destination);
    const peerCalls = new Map<string, number>();
    await reconcile(
      new PeerController({
        objects: counting(reconcileStore, peerCalls),
        events: new EventRecorder(config, namespace, logger),
      }),
      'checked',
    );
    expect(readsOf(peerCalls).peer).toBe(1);
    expect((await read('peers', 'checked')).status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe(
      'True',
    );

    await objects.createNamespacedCustomObject({
      ...at('scripts'),
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'Script',
        metadata: { name: 'applied' },
        spec: { lang: 'lua', source: 'function onRecord(r) return r end' },
      },
    });
    const scriptCalls = new Map<string, number>();
    await reconcile(new ScriptController({ objects: counting(reconcileStore, scriptCalls) }), 'applied');
    expect(readsOf(scriptCalls).script).toBe(1);
    const applied = await read('scripts', 'applied');
    expect(applied.status?.id).toBeGreaterThan(0);
    expect(applied.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'True',
      reason: 'Compiled',
    });
  });

  it('says on a Script whether its source compiles: Ready False with the syntax error, then True once fixed', async () => {
    await objects.createNamespacedCustomObject({
      ...at('scripts'),
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'Script',
        metadata: { name: 'broken' },
        spec: { lang: 'lua', source: 'function onRecord(r)\n  return r +\nend' },
      },
    });
    const controller = new ScriptController({
      objects: reconcileStore,
      events: new EventRecorder(config, namespace, logger),
    });
    await reconcile(controller, 'broken');
    const broken = await read('scripts', 'broken');
    expect(broken.status?.id).toBeGreaterThan(0);
    const ready = broken.status?.conditions?.find((c) => c.type === 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'SyntaxError' });
    expect(ready?.message).toMatch(/broken:3: unexpected symbol near 'end'/);
    const warnings = (await core.listNamespacedEvent({ namespace })).items.filter(
      (event) => event.involvedObject.name === 'broken' && event.reason === 'SyntaxError',
    );
    expect(warnings.map((event) => event.type)).toEqual(['Warning']);
    // Reconciled again at the same generation: nothing to do (no second compile, no second Event).
    await reconcile(controller, 'broken');

    await objects.patchNamespacedCustomObject({
      ...at('scripts'),
      name: 'broken',
      body: [{ op: 'replace', path: '/spec/source', value: 'function onRecord(r) return r end' }],
    });
    await reconcile(controller, 'broken');
    const fixed = await read('scripts', 'broken');
    expect(fixed.status?.id).toBe(broken.status?.id);
    expect(fixed.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'True',
      reason: 'Compiled',
    });
    const events = (await core.listNamespacedEvent({ namespace })).items.filter(
      (event) => event.involvedObject.name === 'broken',
    );
    expect(events.map((event) => event.reason).sort()).toEqual(['Compiled', 'SyntaxError']);
  });

  it('counts a repeated Event on the Event it first made, as client-go does, and makes a new one for a new message', async () => {
    const recorder = new EventRecorder(config, namespace, logger);
    const target = { kind: 'Mirror', name: 'repeats' } as const;
    for (let time = 0; time < 3; time++)
      await recorder.record(target, 'Warning', 'Flapping', 'the same fault');
    await recorder.record(target, 'Warning', 'Flapping', 'another fault');
    const events = (await core.listNamespacedEvent({ namespace })).items.filter(
      (event) => event.involvedObject.name === 'repeats',
    );
    expect(events.map((event) => [event.message, event.count]).sort()).toEqual([
      ['another fault', 1],
      ['the same fault', 3],
    ]);
    const repeated = events.find((event) => event.message === 'the same fault');
    expect(new Date(repeated?.lastTimestamp ?? 0).getTime()).toBeGreaterThanOrEqual(
      new Date(repeated?.firstTimestamp ?? 0).getTime(),
    );
    // The Event gone (expired or deleted): the next repeat makes a new one.
    await core.deleteNamespacedEvent({ name: repeated?.metadata?.name ?? '', namespace });
    await recorder.record(target, 'Warning', 'Flapping', 'the same fault');
    const after = (await core.listNamespacedEvent({ namespace })).items.filter(
      (event) => event.involvedObject.name === 'repeats' && event.message === 'the same fault',
    );
    expect(after.map((event) => event.count)).toEqual([1]);
  });

  it('redoes a status write from a fresh read instead of losing a concurrent write', async () => {
    await applyMirror('race', { state: 'Paused' });
    const stale = await reconcileStore.readMirror('race');
    if (!stale) throw new Error('mirror race not found');
    // Another writer, after the read: a condition of its own, and the failure mark.
    await objects.patchNamespacedCustomObjectStatus({
      ...at('mirrors'),
      name: 'race',
      body: [
        {
          op: 'add',
          path: '/status',
          value: {
            conditions: [
              {
                type: 'Custom',
                status: 'True',
                reason: 'OtherWriter',
                message: '',
                lastTransitionTime: new Date().toISOString(),
                observedGeneration: 1,
              },
            ],
          },
        },
      ],
    });
    await store.recordMirrorFailure('race', 1);

    const seen: (StoredStatus | undefined)[] = [];
    await reconcileStore.writeMirrorStatus(stale, (status) => {
      seen.push(status);
      const conditions = (status?.conditions ?? []) as Parameters<typeof setCondition>[0];
      return {
        phase: 'STATUS_PAUSED',
        conditions: setCondition(conditions, {
          type: 'Ready',
          status: 'False',
          reason: 'Paused',
          message: 'mirror is STATUS_PAUSED',
          observedGeneration: 1,
        }),
      };
    });
    // Built from the stale read, refused with 409, built again from a fresh read.
    expect(seen).toHaveLength(2);
    expect(seen[0]).toBeUndefined();
    const written = (await read('mirrors', 'race')).status;
    expect(written?.phase).toBe('STATUS_PAUSED');
    expect(written?.failedGeneration).toBe(1);
    expect(written?.conditions?.map((condition) => condition.type).sort()).toEqual(['Custom', 'Ready']);
  });
});

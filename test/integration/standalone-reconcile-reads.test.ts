// Standalone mode's reconcile (engine/src/control/mirror-reconciler.ts over the
// embedded store) reads a mirror once per reconcile, and each of its peers once:
// real PGlite store and catalog, an in-process engine, real PostgreSQL peers.
import { PGlite } from '@electric-sql/pglite';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EmbeddedStore } from '../../api-server/src/index.ts';
import { PostgresCatalog } from '../../engine/src/catalog/postgres-catalog.ts';
import { InProcessEngineRuntime } from '../../engine/src/control/in-process-runtime.ts';
import { MirrorReconciler } from '../../engine/src/control/mirror-reconciler.ts';
import { mirrorResourceSpecSchema } from '../../engine/src/control/resources.ts';
import type { ResourceStore } from '../../engine/src/control/store.ts';
import { createTestDatabase, type TestDatabase, waitFor, waitForSameRows } from '../support/databases.ts';

/** `store` with a count of the calls of each of its methods. */
function counting(store: ResourceStore): { store: ResourceStore; calls: Map<string, number> } {
  const calls = new Map<string, number>();
  const proxy = new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        calls.set(String(property), (calls.get(String(property)) ?? 0) + 1);
        return value.apply(target, args);
      };
    },
  });
  return { store: proxy, calls };
}

describe('standalone reconcile', () => {
  const logger = pino({ level: 'silent' });
  let source: TestDatabase;
  let destination: TestDatabase;
  let database: PGlite;
  let store: EmbeddedStore;
  let catalog: PostgresCatalog;
  let runtime: InProcessEngineRuntime;

  beforeAll(async () => {
    [source, destination] = await Promise.all([
      createTestDatabase('reads_src'),
      createTestDatabase('reads_dst'),
    ]);
    await source.client.query(`CREATE TABLE items (id int PRIMARY KEY, v text)`);
    await source.client.query(`INSERT INTO items SELECT g, 'v' || g FROM generate_series(1, 100) g`);
    database = await PGlite.create('memory://');
    catalog = new PostgresCatalog(database);
    store = new EmbeddedStore(database);
    await catalog.migrate();
    await store.migrate();
    runtime = new InProcessEngineRuntime({ catalog, logger });
    await store.putPeer({ name: 'source', kind: 'relational', config: source.config }, null);
    await store.putPeer({ name: 'destination', kind: 'relational', config: destination.config }, null);
  });

  afterAll(async () => {
    await runtime?.stopAll();
    await database?.close();
    await Promise.all([source?.drop(), destination?.drop()]);
  });

  it('reads the mirror once per reconcile: starting, running, paused and dropped', async () => {
    await store.createMirror(
      mirrorResourceSpecSchema.parse({
        name: 'items',
        sourcePeer: 'source',
        destinationPeer: 'destination',
        tableMappings: [
          { source: { schema: 'public', table: 'items' }, destination: { schema: 'public', table: 'items' } },
        ],
        doInitialSnapshot: true,
        idleTimeoutSeconds: 1,
      }),
    );
    const reconcileOnce = async () => {
      const counted = counting(store);
      const reconciler = new MirrorReconciler({
        store: counted.store,
        catalog,
        runtime,
        logger,
        requeue: () => {},
      });
      const outcome = await reconciler.reconcile('items');
      const count = (method: string) => counted.calls.get(method) ?? 0;
      return {
        removed: outcome.removed,
        mirror: count('getMirror') + count('listMirrors'),
        peer: count('getPeer') + count('listPeers'),
      };
    };

    expect(await reconcileOnce()).toEqual({ removed: false, mirror: 1, peer: 2 });
    await waitForSameRows(source.client, destination.client, 'items');
    await waitFor(async () => (await catalog.getRuntime('items'))?.phase === 'running', 60_000, 'running');
    expect(await reconcileOnce()).toEqual({ removed: false, mirror: 1, peer: 2 });

    const running = await store.getMirror('items');
    if (!running) throw new Error('mirror items not found');
    await store.updateMirrorSpec('items', { ...running.spec, state: 'Paused' });
    expect((await reconcileOnce()).mirror).toBe(1);
    expect((await catalog.getRuntime('items'))?.phase).toBe('paused');

    await store.markMirrorDeleting('items');
    expect(await reconcileOnce()).toEqual({ removed: true, mirror: 1, peer: 2 });
    expect(await store.getMirror('items')).toBeUndefined();
  });
});

// The /api/v1 facade for app.inject() tests, in either of its modes: over a
// throw-away embedded control plane (standalone), or over custom resources in a
// fresh namespace of the test kube-apiserver and a catalog in a fresh
// PostgreSQL database (cluster; TRIBUTARY_FACADE_MODE=cluster, which the
// `api-cluster` vitest project sets). The same endpoint tests run in both.
// Peer checks and table lookups are the real ones, against the test servers.
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import pino from 'pino';
import { buildApp } from '../../api-server/src/http/app.ts';
import type { AuthConfig } from '../../api-server/src/http/auth.ts';
import type { ListenerOptions } from '../../api-server/src/http/listener.ts';
import { startControlPlane } from '../../api-server/src/standalone/control-plane.ts';
import type { Catalog } from '../../engine/src/catalog/catalog.ts';
import { PostgresCatalog } from '../../engine/src/catalog/postgres-catalog.ts';
import { checkPeer } from '../../engine/src/connectors/peer-check.ts';
import { checkMirrorSource, findMissingTables } from '../../engine/src/connectors/postgres/source/inspect.ts';
import type { ResourceStore } from '../../engine/src/control/store.ts';
import { KubeStore } from '../../operator/src/kube/kube-store.ts';
import { createTestDatabase, droppablePool } from './databases.ts';
import { adminConfig, createNamespace, installCrds } from './kube.ts';

export const facadeMode: 'standalone' | 'cluster' =
  process.env.TRIBUTARY_FACADE_MODE === 'cluster' ? 'cluster' : 'standalone';
/** For the few tests about one mode's storage only. */
export const clusterMode = facadeMode === 'cluster';

/** What the tests reach behind the facade: its resource store and catalog. */
export interface Backend {
  readonly store: ResourceStore;
  readonly catalog: Catalog;
  /** Cluster mode only: where the facade keeps its custom resources. */
  readonly kube?: { readonly namespace: string };
  close(): Promise<void>;
}

export const apiPassword = 'facade-test-password';

export interface Facade {
  readonly app: FastifyInstance;
  readonly controlPlane: Backend;
  /** Sends a request with valid credentials (unless `headers` overrides them). */
  request(options: InjectOptions): Promise<LightMyRequestResponse>;
  post(url: string, body: unknown): Promise<LightMyRequestResponse>;
  close(): Promise<void>;
}

export const basicAuth = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

export async function createFacade(
  options: { scriptsEnabled?: boolean; auth?: AuthConfig; dataDir?: string; listener?: ListenerOptions } = {},
): Promise<Facade> {
  const logger = pino({ level: process.env.TRIBUTARY_TEST_LOG ?? 'silent' });
  const controlPlane =
    facadeMode === 'cluster'
      ? await clusterBackend()
      : await startControlPlane({
          dataDir: options.dataDir ?? 'memory://',
          logger,
          runEngines: false,
          retryBackoffMs: { initial: 200, max: 1_000 },
        });
  const app = buildApp(
    {
      store: controlPlane.store,
      catalog: controlPlane.catalog,
      checkPeer: (peer) => checkPeer(peer, 5_000),
      findMissingTables,
      checkMirrorSource,
      scriptsEnabled: options.scriptsEnabled ?? true,
      auth: options.auth ?? { mode: 'basic', password: apiPassword },
      logger,
    },
    options.listener,
  );
  await app.ready();
  const request = (injectOptions: InjectOptions) =>
    app.inject({
      ...injectOptions,
      headers: { authorization: basicAuth('', apiPassword), ...injectOptions.headers },
    });
  return {
    app,
    controlPlane,
    request,
    post: (url, body) =>
      request({ method: 'POST', url, payload: body as NonNullable<InjectOptions['payload']> }),
    async close() {
      await app.close();
      await controlPlane.close();
    },
  };
}

let crdsInstalled: Promise<void> | undefined;

/** The cluster-mode backend: a namespace of its own and a migrated catalog database. */
async function clusterBackend(): Promise<Backend> {
  const config = adminConfig();
  crdsInstalled ??= installCrds(config);
  await crdsInstalled;
  const [namespace, database] = await Promise.all([
    createNamespace('api', config),
    createTestDatabase('api_cat'),
  ]);
  const pool = droppablePool({ ...database.config, max: 4 });
  const catalog = new PostgresCatalog(pool);
  await catalog.migrate();
  return {
    store: new KubeStore(config, namespace),
    catalog,
    kube: { namespace },
    async close() {
      await pool.end();
      await database.drop();
    },
  };
}

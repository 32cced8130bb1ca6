// The /api/v1 facade over a throw-away embedded control plane, for app.inject()
// tests. Peer checks and table lookups are the real ones, against the test servers.
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import pino from 'pino';
import { buildApp } from '../../api-server/src/http/app.ts';
import type { AuthConfig } from '../../api-server/src/http/auth.ts';
import { type ControlPlane, startControlPlane } from '../../api-server/src/standalone/control-plane.ts';
import { checkPeer } from '../../engine/src/connectors/peer-check.ts';
import { findMissingTables } from '../../engine/src/connectors/postgres/inspect.ts';

export const apiPassword = 'facade-test-password';

export interface Facade {
  readonly app: FastifyInstance;
  readonly controlPlane: ControlPlane;
  /** Sends a request with valid credentials (unless `headers` overrides them). */
  request(options: InjectOptions): Promise<LightMyRequestResponse>;
  post(url: string, body: unknown): Promise<LightMyRequestResponse>;
  close(): Promise<void>;
}

export const basicAuth = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

export async function createFacade(
  options: { scriptsEnabled?: boolean; auth?: AuthConfig; runEngines?: boolean; dataDir?: string } = {},
): Promise<Facade> {
  const logger = pino({ level: process.env.TRIBUTARY_TEST_LOG ?? 'silent' });
  const controlPlane = await startControlPlane({
    dataDir: options.dataDir ?? 'memory://',
    logger,
    runEngines: options.runEngines ?? false,
    retryBackoffMs: { initial: 200, max: 1_000 },
  });
  const app = buildApp({
    store: controlPlane.store,
    catalog: controlPlane.catalog,
    checkPeer: (peer) => checkPeer(peer, 5_000),
    findMissingTables,
    scriptsEnabled: options.scriptsEnabled ?? true,
    auth: options.auth ?? { mode: 'basic', password: apiPassword },
    logger,
  });
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

import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { type MetricsServer, serveMetrics } from './metrics-server.ts';

describe('metrics server probes', () => {
  let server: MetricsServer | undefined;
  afterEach(async () => {
    await server?.close();
  });

  it('answers /healthz always and /readyz as ready() says', async () => {
    let ready = false;
    server = await serveMetrics(new Registry(), 0, '127.0.0.1', () => ready);
    const get = (path: string) => fetch(`http://127.0.0.1:${server?.port}${path}`);
    expect((await get('/healthz')).status).toBe(200);
    expect((await get('/readyz')).status).toBe(503);
    ready = true;
    expect((await get('/readyz')).status).toBe(200);
    expect((await get('/metrics')).status).toBe(200);
    expect((await get('/other')).status).toBe(404);
  });
});

// A bare HTTP endpoint for Prometheus and the kubelet's probes: GET /metrics,
// GET /healthz (the process answers: liveness) and GET /readyz (`ready()` says
// yes: readiness). An engine or operator serves nothing else, so a framework
// would add nothing.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export interface MetricsServer {
  readonly port: number;
  close(): Promise<void>;
}

export async function serveMetrics(
  registry: Registry,
  port: number,
  host = '0.0.0.0',
  ready: () => boolean = () => true,
): Promise<MetricsServer> {
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (request.method !== 'GET' || (path !== '/metrics' && path !== '/healthz' && path !== '/readyz')) {
      response.writeHead(404).end();
      return;
    }
    if (path === '/healthz') {
      response.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
      return;
    }
    if (path === '/readyz') {
      const isReady = ready();
      response
        .writeHead(isReady ? 200 : 503, { 'content-type': 'text/plain' })
        .end(isReady ? 'ok\n' : 'not ready\n');
      return;
    }
    registry.metrics().then(
      (text) => response.writeHead(200, { 'content-type': registry.contentType }).end(text),
      () => response.writeHead(500).end(),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

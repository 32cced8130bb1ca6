// A real webhook receiver on a loopback port for notification tests: it keeps
// every body it took, can go down (its port refusing connections) and come back
// up on the same port.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface WebhookReceiver {
  readonly url: string;
  /** Every body taken, in order of arrival. */
  readonly bodies: Record<string, unknown>[];
  /** Requests that arrived, taken or not. */
  readonly requests: () => number;
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startWebhookReceiver(host = '127.0.0.1'): Promise<WebhookReceiver> {
  const bodies: Record<string, unknown>[] = [];
  let requests = 0;
  let server: Server | undefined;
  let port = 0;
  const listen = async () => {
    const next = createServer((request, response) => {
      requests++;
      let text = '';
      request.setEncoding('utf8');
      request.on('data', (chunk: string) => (text += chunk));
      request.on('end', () => {
        try {
          bodies.push(JSON.parse(text) as Record<string, unknown>);
          response.writeHead(204).end();
        } catch {
          response.writeHead(400).end();
        }
      });
    });
    await new Promise<void>((resolve, reject) => {
      next.once('error', reject);
      next.listen(port, host, resolve);
    });
    port = (next.address() as AddressInfo).port;
    server = next;
  };
  const stop = async () => {
    const current = server;
    server = undefined;
    if (!current) return;
    current.closeAllConnections();
    await new Promise((resolve) => current.close(resolve));
  };
  await listen();
  return {
    url: `http://${host}:${port}/hook`,
    bodies,
    requests: () => requests,
    down: stop,
    up: listen,
    close: stop,
  };
}

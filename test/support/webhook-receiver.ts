// A real webhook receiver on a loopback port (or the real node's bridge address,
// for pods) for notification tests: it keeps every body it took, with the path
// it was posted to and who sent it, can go down (its port refusing connections)
// and come back up on the same port.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One body taken, and how it came. */
export interface WebhookDelivery {
  /** The request's path (the URL's path and query as the sender used it). */
  readonly path: string;
  /** The sender's address as the receiver's socket saw it. */
  readonly from: string;
  readonly body: Record<string, unknown>;
}

export interface WebhookReceiver {
  readonly url: string;
  /** Every body taken, in order of arrival. */
  readonly bodies: Record<string, unknown>[];
  /** The same bodies with their paths and senders. */
  readonly deliveries: WebhookDelivery[];
  /** Requests that arrived, taken or not. */
  readonly requests: () => number;
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startWebhookReceiver(host = '127.0.0.1'): Promise<WebhookReceiver> {
  const bodies: Record<string, unknown>[] = [];
  const deliveries: WebhookDelivery[] = [];
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
          const body = JSON.parse(text) as Record<string, unknown>;
          bodies.push(body);
          deliveries.push({ path: request.url ?? '', from: request.socket.remoteAddress ?? '', body });
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
    deliveries,
    requests: () => requests,
    down: stop,
    up: listen,
    close: stop,
  };
}

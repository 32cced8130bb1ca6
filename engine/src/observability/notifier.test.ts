import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import {
  deliveryBackoffMs,
  jsonBody,
  type Notification,
  readWebhookUrl,
  repeats,
  safeMessage,
  slackBody,
  WebhookNotifier,
  webhookConfigFromEnvironment,
} from './notifier.ts';

const at = new Date('2026-01-02T03:04:05.000Z');
const failed: Notification = { kind: 'mirror_failed', mirror: 'orders', message: 'destination refused', at };
const origin = { installation: 'inst-1' };

describe('notification bodies', () => {
  it('writes the plain JSON body with its id, severity and origin', () => {
    expect(jsonBody(failed, 'id-1', { installation: 'inst-1', namespace: 'shop' })).toEqual({
      version: 1,
      id: 'id-1',
      kind: 'mirror_failed',
      severity: 'critical',
      installation: 'inst-1',
      namespace: 'shop',
      mirror: 'orders',
      message: 'destination refused',
      at: '2026-01-02T03:04:05.000Z',
    });
    const table = jsonBody(
      { kind: 'table_errored', mirror: 'm', table: 'public.t', reason: 'schema_mismatch', message: 'x', at },
      'id-2',
      origin,
    );
    expect(table).toMatchObject({ table: 'public.t', reason: 'schema_mismatch', severity: 'warning' });
    expect(table).not.toHaveProperty('namespace');
  });

  it('writes a Slack body of one text line', () => {
    expect(slackBody(failed, origin)).toEqual({
      text: ':warning: Tributary mirror *orders*: failed. destination refused',
    });
    expect(
      slackBody(
        { kind: 'table_recovered', mirror: 'm', table: 'public.t', message: 'back', at },
        {
          installation: 'i',
          namespace: 'ns',
        },
      ).text,
    ).toBe(
      ':white_check_mark: Tributary mirror *m* (namespace ns): table streaming again. table public.t: back',
    );
  });

  it('keeps a message to one bounded line and masks credentials in a URL', () => {
    expect(safeMessage('a\n  b')).toBe('a b');
    expect(safeMessage('cannot reach postgres://app:s3cret@db:5432/x')).toBe(
      'cannot reach postgres://***@db:5432/x',
    );
    expect(safeMessage('x'.repeat(5000))).toHaveLength(1000);
  });
});

describe('deliveryBackoffMs', () => {
  it('doubles from the initial delay up to the cap', () => {
    const backoff = { initialMs: 100, maxMs: 1000 };
    expect([0, 1, 2, 3, 4, 5, 100].map((attempt) => deliveryBackoffMs(attempt, backoff))).toEqual([
      0, 100, 200, 400, 800, 1000, 1000,
    ]);
  });
});

describe('repeats', () => {
  it('drops what says again the last word on a subject, not a new cause or a recovery', () => {
    expect(repeats(undefined, failed)).toBe(false);
    expect(repeats(failed, { ...failed, at: new Date() })).toBe(true);
    expect(repeats(failed, { ...failed, message: 'another cause' })).toBe(false);
    expect(repeats(failed, { ...failed, kind: 'mirror_recovered' })).toBe(false);
    const danger: Notification = {
      kind: 'slot_in_danger',
      mirror: 'm',
      reason: 'WalAtRisk',
      message: 'a',
      at,
    };
    expect(repeats(danger, { ...danger, message: 'b' })).toBe(true);
    expect(repeats(danger, { ...danger, reason: 'Invalidated' })).toBe(false);
  });
});

describe('the webhook URL file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tributary-notify-'));
  it('reads an http(s) URL and refuses anything else without showing it', () => {
    const file = join(dir, 'url');
    writeFileSync(file, 'https://hooks.example/T0/B0/secret-part\n');
    expect(readWebhookUrl(file).href).toBe('https://hooks.example/T0/B0/secret-part');
    writeFileSync(file, 'ftp://hooks.example/secret-part');
    expect(() => readWebhookUrl(file)).toThrow(/must hold an http or https URL/);
    writeFileSync(file, 'not a url secret-part');
    expect(() => readWebhookUrl(file)).toThrow(/does not hold a URL/);
    expect(() => readWebhookUrl(file)).not.toThrow(/secret-part/);
    expect(() => readWebhookUrl(join(dir, 'missing'))).toThrow(/cannot be read/);
  });

  it('is configured from the environment, with its format checked', () => {
    const file = join(dir, 'env-url');
    writeFileSync(file, 'http://127.0.0.1:9/');
    expect(webhookConfigFromEnvironment({})).toBeUndefined();
    expect(webhookConfigFromEnvironment({ TRIBUTARY_NOTIFY_URL_FILE: file })).toEqual({
      urlFile: file,
      format: 'json',
    });
    expect(() =>
      webhookConfigFromEnvironment({ TRIBUTARY_NOTIFY_URL_FILE: file, TRIBUTARY_NOTIFY_FORMAT: 'xml' }),
    ).toThrow(/json, slack/);
  });
});

// A real receiver on a loopback port: the delivery path as it runs, down to the socket.
describe('WebhookNotifier', () => {
  let server: Server | undefined;
  let notifier: WebhookNotifier | undefined;
  afterEach(async () => {
    await notifier?.close(0);
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    server = undefined;
  });

  const receiver = async (answer: () => number, port = 0) => {
    const bodies: Record<string, unknown>[] = [];
    server = createServer((request, response) => {
      let text = '';
      request.on('data', (chunk) => (text += chunk));
      request.on('end', () => {
        const status = answer();
        if (status < 300) bodies.push(JSON.parse(text) as Record<string, unknown>);
        response.writeHead(status).end();
      });
    });
    await new Promise<void>((resolve) => server?.listen(port, '127.0.0.1', resolve));
    return { bodies, port: (server.address() as AddressInfo).port };
  };
  const urlFile = (port: number) => {
    const file = join(mkdtempSync(join(tmpdir(), 'tributary-notify-')), 'url');
    writeFileSync(file, `http://127.0.0.1:${port}/hook`);
    return file;
  };
  const until = async (check: () => boolean, what: string) => {
    for (let i = 0; i < 200 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 25));
    if (!check()) throw new Error(`timed out waiting for ${what}`);
  };

  it('delivers in order, once each, retrying a receiver that answers 503 at first', async () => {
    let refusals = 2;
    const { bodies, port } = await receiver(() => (refusals-- > 0 ? 503 : 200));
    notifier = new WebhookNotifier({
      config: { urlFile: urlFile(port), format: 'json' },
      origin: async () => origin,
      logger: pino({ level: 'silent' }),
      backoff: { initialMs: 10, maxMs: 50 },
    });
    notifier.notify(failed);
    notifier.notify({ ...failed, at: new Date() }); // the same word again: dropped
    notifier.notify({ ...failed, kind: 'mirror_recovered', message: 'back' });
    await until(() => bodies.length === 2, 'two deliveries');
    expect(bodies.map((body) => body.kind)).toEqual(['mirror_failed', 'mirror_recovered']);
    expect(new Set(bodies.map((body) => body.id)).size).toBe(2);
  });

  it('keeps at most queueLimit waiting, dropping the oldest', async () => {
    let down = true;
    let refused = 0;
    const { bodies, port } = await receiver(() => (down ? (refused++, 503) : 200));
    notifier = new WebhookNotifier({
      config: { urlFile: urlFile(port), format: 'json' },
      origin: async () => origin,
      logger: pino({ level: 'silent' }),
      backoff: { initialMs: 10, maxMs: 20 },
      queueLimit: 2,
    });
    // The first goes out at once and stays at the head, failing; two more fill the queue.
    for (const mirror of ['a', 'b', 'c']) notifier.notify({ ...failed, mirror });
    await until(() => refused > 0, 'a refusal');
    down = false;
    await until(() => bodies.length >= 2, 'the two kept');
    await notifier.close();
    expect(bodies.map((body) => body.mirror)).toEqual(['b', 'c']);
  });
});

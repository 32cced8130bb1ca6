// The web console of a real standalone process, over HTTP as a browser without
// JavaScript uses it: behind the API's authentication, a mirror in the list, its
// page with configuration, tables, peers, batches and filtered logs, and pause /
// drop through the confirmation form. (No browser-driven test yet: see docs/console.md.)
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, randomSuffix, type TestDatabase, waitFor } from '../support/databases.ts';
import {
  createRelationalPeers,
  createTableMirror,
  mirrorState,
  type StandaloneProcess,
  startStandalone,
} from '../support/standalone-process.ts';

const password = 'console-e2e-password';
const authorization = `Basic ${Buffer.from(`:${password}`).toString('base64')}`;

describe('web console', () => {
  let source: TestDatabase;
  let destination: TestDatabase;
  let service: StandaloneProcess;
  const dataDir = join(mkdtempSync(join(tmpdir(), 'tributary-console-')), 'data');
  const suffix = randomSuffix();
  const mirror = `shop-${suffix}`;

  const open = async (path: string, init: RequestInit = {}) => {
    const response = await fetch(`${service.baseUrl}${path}`, {
      redirect: 'manual',
      ...init,
      headers: { authorization, ...(init.headers as Record<string, string> | undefined) },
    });
    return {
      status: response.status,
      location: response.headers.get('location'),
      text: await response.text(),
    };
  };
  const post = (path: string, form: Record<string, string>, headers: Record<string, string> = {}) =>
    open(path, {
      method: 'POST',
      body: new URLSearchParams(form).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    });
  const state = () => mirrorState(service, mirror);

  beforeAll(async () => {
    [source, destination] = await Promise.all([createTestDatabase('con_src'), createTestDatabase('con_dst')]);
    await source.client.query(`CREATE TABLE orders (id int PRIMARY KEY, item text)`);
    await source.client.query(`INSERT INTO orders SELECT g, 'item ' || g FROM generate_series(1, 250) g`);
    service = await startStandalone(dataDir, password);
    await createRelationalPeers(service, [
      [`src-${suffix}`, source],
      [`dst-${suffix}`, destination],
    ]);
    const created = await createTableMirror(service, {
      name: mirror,
      sourcePeer: `src-${suffix}`,
      destinationPeer: `dst-${suffix}`,
      table: 'public.orders',
    });
    expect(created.status).toBe(200);
    await waitFor(async () => (await state()) === 'STATUS_RUNNING', 60_000, 'running');
    await source.client.query(`INSERT INTO orders VALUES (1001, 'bread')`);
    await waitFor(
      async () => {
        const { body } = await service.call('POST', '/api/v1/mirrors/cdc/batches', {
          flowJobName: mirror,
          limit: 1,
        });
        const last = (body as { cdcBatches: { endTime: string | null; numRows: string }[] }).cdcBatches[0];
        return last !== undefined && last.endTime !== null && last.numRows === '1';
      },
      60_000,
      'a finished CDC batch with the new row',
    );
  });

  afterAll(async () => {
    await service?.stop();
    await Promise.all([source?.drop(), destination?.drop()]);
  });

  it('asks for the API password', async () => {
    const response = await fetch(`${service.baseUrl}/`);
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toMatch(/^Basic realm="tributary"/);
    await response.body?.cancel();
  });

  it('lists the mirror with its state, peers, rows and last batch', async () => {
    const list = await open('/');
    expect(list.status).toBe(200);
    expect(list.text).toContain(`<a href="/mirrors/${mirror}">${mirror}</a>`);
    const row = list.text.slice(list.text.indexOf(`/mirrors/${mirror}"`));
    expect(row).toMatch(/<td class="state">running<\/td>/);
    expect(row).toContain(`src-${suffix} → dst-${suffix}`);
    expect(row).toMatch(/<td>251<\/td>/);
    expect(row).toMatch(/<td>#\d+, \d+ s ago<\/td>/);
  });

  it("shows a mirror's configuration, tables, masked peers, batches and logs", async () => {
    const page = await open(`/mirrors/${mirror}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain(`<h1>Mirror ${mirror}</h1>`);
    expect(page.text).toMatch(/<th scope="row">idleTimeoutSeconds<\/th><td>1<\/td>/);
    expect(page.text).toMatch(
      /<td>public\.orders<\/td><td>public\.orders<\/td>\s*<td class="state">streaming<form method="post" action="\/mirrors\/[^"]+\/tables\/resync">[\s\S]*?<\/form><\/td>\s*<td>done<\/td>\s*<td>250<\/td>\s*<td>1 \/ 0 \/ 0<\/td>/,
    );
    expect(page.text).toContain('&quot;password&quot;:&quot;********&quot;');
    expect(page.text).not.toContain(source.config.password);
    expect(page.text).toMatch(/<td>#\d+<\/td><td>1<\/td>/);
    expect(page.text).toContain('initial load finished');
    // The level filter: only errors (there are none), so no info line.
    const errorsOnly = await open(`/mirrors/${mirror}?level=ERROR`);
    expect(errorsOnly.text).toContain('<option value="ERROR" selected>');
    expect(errorsOnly.text).not.toContain('initial load finished');
    expect((await open('/mirrors/no-such-mirror')).status).toBe(404);
  });

  it('pauses through the confirmation form, and refuses a form posted from another site', async () => {
    const confirm = await open(`/mirrors/${mirror}/confirm?action=pause`);
    expect(confirm.text).toContain(`<form method="post" action="/mirrors/${mirror}/action">`);
    expect(confirm.text).toContain('<input type="hidden" name="action" value="pause">');

    const foreign = await post(
      `/mirrors/${mirror}/action`,
      { action: 'pause' },
      { origin: 'https://evil.example' },
    );
    expect(foreign.status).toBe(403);
    expect(await state()).toBe('STATUS_RUNNING');

    const paused = await post(`/mirrors/${mirror}/action`, { action: 'pause' });
    expect(paused).toMatchObject({ status: 303, location: `/mirrors/${mirror}` });
    await waitFor(async () => (await state()) === 'STATUS_PAUSED', 60_000, 'paused');
    const page = await open(`/mirrors/${mirror}`);
    expect(page.text).toContain('<span class="state">paused</span>');
    expect(page.text).toContain(`/mirrors/${mirror}/confirm?action=resume`);
    expect((await post(`/mirrors/${mirror}/action`, { action: 'explode' })).status).toBe(400);
    // A table's Resync button: refused from another site; the API's refusal on a page of its own.
    const resyncPath = `/mirrors/${mirror}/tables/resync`;
    expect(
      (await post(resyncPath, { table: 'public.orders' }, { origin: 'https://evil.example' })).status,
    ).toBe(403);
    const unmapped = await post(resyncPath, { table: 'public.nowhere' });
    expect(unmapped.status).toBe(400);
    expect(unmapped.text).toContain('Could not resync public.nowhere');
  });

  it('lists every peer with its kind, version and masked configuration', async () => {
    const peers = await open('/peers');
    expect(peers.status).toBe(200);
    for (const [peer, database] of [
      [`src-${suffix}`, source],
      [`dst-${suffix}`, destination],
    ] as const) {
      // Each name leads to the peer's own page.
      const row = peers.text.slice(peers.text.indexOf(`<td><a href="/peers/${peer}">${peer}</a></td>`));
      expect(row).toMatch(/^<td><a href="[^"]+">[^<]+<\/a><\/td><td>relational<\/td><td>1\d\.\d+[^<]*<\/td>/);
      expect(row).toContain(`&quot;database&quot;:&quot;${database.name}&quot;`);
    }
    expect(peers.text).toContain('&quot;password&quot;:&quot;********&quot;');
    expect(peers.text).not.toContain(source.config.password);
  });

  it('creates a script, refuses a save that does not compile with its line, and keeps what was typed', async () => {
    const name = `shaper_${suffix}`;
    const newForm = await open('/scripts/new');
    expect(newForm.text).toContain('<form method="post" action="/scripts/new">');
    expect(newForm.text).toContain('<label for="script-source">');

    const valid = 'function onRecord(record)\n  return record\nend\n';
    const created = await post('/scripts/new', { name, source: valid.replaceAll('\n', '\r\n') });
    expect(created.status, created.text).toBe(303);
    const path = created.location?.replace(/\?saved=1$/, '') ?? '';
    expect(path).toMatch(/^\/scripts\/\d+$/);
    const id = Number(path.split('/').at(-1));
    const saved = await open(created.location ?? '');
    expect(saved.text).toContain('Saved.');
    expect(saved.text).toContain(`value="${name}"`);
    expect((await service.call('GET', `/api/v1/scripts/${id}`)).body).toEqual({
      scripts: [{ id, name, lang: 'lua', source: valid }],
    });
    expect((await open('/scripts')).text).toContain(`<a href="${path}">${name}</a>`);

    const broken = 'function onRecord(record)\n  return record +\nend\n';
    const refused = await post(path, { name, source: broken });
    expect(refused.status).toBe(400);
    expect(refused.text).toContain(`does not compile: ${name}:3: unexpected symbol near &#39;end&#39;`);
    expect(refused.text).toContain('return record +');
    expect((await service.call('GET', `/api/v1/scripts/${id}`)).body).toMatchObject({
      scripts: [{ source: valid }],
    });

    const foreign = await post(path, { name, source: '' }, { origin: 'https://evil.example' });
    expect(foreign.status).toBe(403);
    expect((await open('/scripts/999999999')).status).toBe(404);
  });

  it('drops the mirror and the list no longer shows it', async () => {
    const dropped = await post(`/mirrors/${mirror}/action`, { action: 'drop' });
    expect(dropped).toMatchObject({ status: 303, location: '/' });
    await waitFor(async () => (await state()) === 'STATUS_TERMINATED', 60_000, 'dropped');
    await waitFor(
      async () => !(await open('/')).text.includes(`/mirrors/${mirror}"`),
      30_000,
      'gone from the list',
    );
  });
});

// The console's forms on a real standalone process, over HTTP as a browser
// without JavaScript posts them: a peer created in the form (its connection
// tested first, a wrong password refused with the reason and never shown back),
// its page; a mirror created in the form with tables picked from the source's
// schema (the source browsing additions), a refused option shown next to its
// field, then the mirror running and its rows at the destination.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, randomSuffix, type TestDatabase, waitFor } from '../support/databases.ts';
import { mirrorState, type StandaloneProcess, startStandalone } from '../support/standalone-process.ts';

const password = 'console-forms-password';
const authorization = `Basic ${Buffer.from(`:${password}`).toString('base64')}`;

describe('console forms', () => {
  let source: TestDatabase;
  let destination: TestDatabase;
  let service: StandaloneProcess;
  const dataDir = join(mkdtempSync(join(tmpdir(), 'tributary-console-forms-')), 'data');
  const suffix = randomSuffix();
  const sourcePeer = `src-${suffix}`;
  const destinationPeer = `dst-${suffix}`;
  const mirror = `form-${suffix}`;

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
  const peerForm = (name: string, database: TestDatabase, overrides: Record<string, string> = {}) => ({
    kind: 'relational',
    name,
    'config.host': database.config.host,
    'config.port': String(database.config.port),
    'config.user': database.config.user,
    'config.password': database.config.password,
    'config.database': database.config.database,
    ...overrides,
  });

  beforeAll(async () => {
    [source, destination] = await Promise.all([
      createTestDatabase('form_src'),
      createTestDatabase('form_dst'),
    ]);
    await source.client.query(`
      CREATE TABLE orders (id int PRIMARY KEY, item text, secret_note text);
      CREATE TABLE notes (body text);
      CREATE TABLE extras (id int PRIMARY KEY, label text);
      INSERT INTO extras SELECT g, 'extra ' || g FROM generate_series(1, 30) g;
      INSERT INTO orders SELECT g, 'item ' || g, 'hidden' FROM generate_series(1, 120) g`);
    service = await startStandalone(dataDir, password);
  });

  afterAll(async () => {
    await service?.stop();
    await Promise.all([source?.drop(), destination?.drop()]);
  });

  it('creates peers in the form: tested first, a wrong password refused and never shown back', async () => {
    const form = await open('/new/peer?kind=relational');
    expect(form.status).toBe(200);
    expect(form.text).toContain('name="config.host"');
    expect(form.text).toMatch(/type="password" id="peer-password" name="config.password"/);
    expect(form.text).toContain('The server&#39;s TCP port.');

    const wrong = 'not-the-password-42';
    const refused = await post('/new/peer', {
      ...peerForm(sourcePeer, source, { 'config.password': wrong }),
      intent: 'test',
    });
    expect(refused.status).toBe(422);
    expect(refused.text).toMatch(/failed to validate peer/);
    expect(refused.text).not.toContain(wrong);
    // The rest of what was typed stays.
    expect(refused.text).toContain(`value="${source.config.database}"`);

    const tested = await post('/new/peer', { ...peerForm(sourcePeer, source), intent: 'test' });
    expect(tested.status).toBe(200);
    expect(tested.text).toMatch(/can be reached \(version 1\d/);
    expect((await service.call('GET', `/api/v1/peers/info/${sourcePeer}`)).status).toBe(404);

    for (const [name, database] of [
      [sourcePeer, source],
      [destinationPeer, destination],
    ] as const) {
      const saved = await post('/new/peer', { ...peerForm(name, database), intent: 'save' });
      expect(saved.status, saved.text).toBe(303);
      expect(saved.location).toBe(`/peers/${name}`);
    }
    const peerPage = await open(`/peers/${sourcePeer}`);
    expect(peerPage.text).toContain('relational');
    expect(peerPage.text).toContain('********');
    expect(peerPage.text).not.toContain(source.config.password);

    const foreign = await post(
      '/new/peer',
      { ...peerForm(`x-${suffix}`, source), intent: 'save' },
      {
        'sec-fetch-site': 'cross-site',
      },
    );
    expect(foreign.status).toBe(403);
    expect((await service.call('GET', `/api/v1/peers/info/x-${suffix}`)).status).toBe(404);
  });

  it('creates a mirror in the form from tables picked in the source’s schema, a refused option shown by its field', async () => {
    const form = await open(`/new/mirror?name=${mirror}&source=${sourcePeer}&destination=${destinationPeer}`);
    expect(form.status).toBe(200);
    // The schema chosen for the person (public), its tables with what replicating each takes.
    expect(form.text).toContain('Tables of schema public');
    expect(form.text).toMatch(/name="table\.\d\.source" value="public\.orders"/);
    expect(form.text).toMatch(/aria-label="replicate public\.notes" disabled/);
    expect(form.text).toContain('no primary key or replica identity');
    expect(form.text).toMatch(/name="max_batch_size" value="" placeholder="\d+"/);
    const ordersIndex = /name="table\.(\d)\.source" value="public\.orders"/.exec(form.text)?.[1];
    expect(ordersIndex).toBeDefined();
    // Every offered table as the page lists it, one of them picked.
    const offered = Object.fromEntries(
      [...form.text.matchAll(/name="(table\.\d\.source)" value="([^"]+)"/g)].map((match) => [
        match[1],
        match[2],
      ]),
    );
    const fields = (index: string) => ({
      name: mirror,
      source: sourcePeer,
      destination: destinationPeer,
      schema: 'public',
      ...offered,
      [`table.${index}.pick`]: 'on',
      [`table.${index}.destination`]: 'public.orders_copy',
      [`table.${index}.exclude`]: 'secret_note',
      'do_initial_snapshot.shown': 'on',
      do_initial_snapshot: 'on',
      'streaming.shown': 'on',
      idle_timeout_seconds: '1',
    });

    const refused = await post('/new/mirror', { ...fields(ordersIndex ?? '0'), max_batch_size: '-5' });
    expect(refused.status).toBe(400);
    // Next to its field: the message right after the option's label.
    expect(refused.text).toMatch(
      /<label for="mirror-max_batch_size">max_batch_size<\/label><br><input[^>]*value="-5"[^>]*> <strong class="error" role="alert">[^<]*max_batch_size/,
    );
    expect(await mirrorState(service, mirror)).not.toBe('STATUS_RUNNING');

    const created = await post('/new/mirror', fields(ordersIndex ?? '0'));
    expect(created.status, created.text).toBe(303);
    expect(created.location).toBe(`/mirrors/${mirror}`);
    await waitFor(async () => (await mirrorState(service, mirror)) === 'STATUS_RUNNING', 60_000, 'running');
    await source.client.query(`INSERT INTO orders VALUES (1001, 'bread', 'hidden')`);
    await waitFor(
      async () => {
        const { rows } = await destination.client
          .query<{ n: number }>(`SELECT count(*)::int AS n FROM public.orders_copy`)
          .catch(() => ({ rows: [{ n: 0 }] }));
        return rows[0]?.n === 121;
      },
      60_000,
      'the rows at the destination',
    );
    const columns = await destination.client.query<{ column_name: string }>(
      `SELECT column_name FROM information_schema.columns WHERE table_name = 'orders_copy' ORDER BY ordinal_position`,
    );
    expect(columns.rows.map((row) => row.column_name)).not.toContain('secret_note');
    const peerPage = await open(`/peers/${sourcePeer}`);
    expect(peerPage.text).toContain(`/mirrors/${mirror}`);
  });

  it('runs a script on a sample record in the editor, before anything is saved', async () => {
    const editor = await open('/scripts/new');
    expect(editor.text).toContain('name="sample"');
    const source = `function onRecord(r)
  print('saw ' .. r.row.item)
  r.row.item = string.upper(r.row.item)
  return r.row
end`;
    const tried = await post('/scripts/new', {
      name: `try_${suffix}`,
      source,
      sample: JSON.stringify({
        kind: 'insert',
        row: { id: '7', item: 'jam' },
        new: { id: '7', item: 'jam' },
      }),
      sample_form: 'rows',
      intent: 'try',
    });
    expect(tried.status).toBe(200);
    expect(tried.text).toContain('The row after the script');
    expect(tried.text).toMatch(/&quot;item&quot;: &quot;JAM&quot;/);
    expect(tried.text).toContain('saw jam');
    // What was typed stays in the editor, and nothing was saved.
    expect(tried.text).toContain('string.upper(r.row.item)');
    const scripts = (await service.call('GET', '/api/v1/scripts/-1')).body as { scripts: { name: string }[] };
    expect(scripts.scripts.map((script) => script.name)).not.toContain(`try_${suffix}`);

    const failing = await post('/scripts/new', {
      name: `try_${suffix}`,
      source: 'function onRecord(r)\n  return r.nothing.here\nend',
      sample: '{"kind": "insert", "row": {}}',
      intent: 'try',
    });
    expect(failing.text).toMatch(new RegExp(`role="alert">[^<]*try_${suffix}:2:`));
    const notJson = await post('/scripts/new', { name: 'x', source, sample: '{not json', intent: 'try' });
    expect(notJson.text).toContain('the sample is not JSON');
  });

  it('edits a paused mirror in the form: a table added, the batch size changed, and resumes it', async () => {
    const running = await open(`/mirrors/${mirror}/edit`);
    expect(running.status).toBe(409);
    expect(running.text).toContain('pause it first');
    const paused = await service.call('POST', '/api/v1/mirrors/state_change', {
      flowJobName: mirror,
      requestedFlowState: 'STATUS_PAUSED',
    });
    expect(paused.status).toBe(200);
    await waitFor(async () => (await mirrorState(service, mirror)) === 'STATUS_PAUSED', 60_000, 'paused');
    expect((await open(`/mirrors/${mirror}`)).text).toContain(`/mirrors/${mirror}/edit`);

    const form = await open(`/mirrors/${mirror}/edit`);
    expect(form.status).toBe(200);
    // The mapped table is offered for removal, not again for adding.
    expect(form.text).toContain('aria-label="remove public.orders"');
    expect(form.text).not.toContain('aria-label="replicate public.orders"');
    const extras = /name="table\.(\d)\.source" value="public\.extras"/.exec(form.text)?.[1];
    expect(extras).toBeDefined();
    const tables = Object.fromEntries(
      [...form.text.matchAll(/name="(table\.\d\.source)" value="([^"]+)"/g)].map((match) => [
        match[1],
        match[2],
      ]),
    );
    const saved = await post(`/mirrors/${mirror}/edit`, {
      schema: 'public',
      'remove.0.source': 'public.orders',
      'remove.0.destination': 'public.orders_copy',
      ...tables,
      [`table.${extras}.pick`]: 'on',
      [`table.${extras}.destination`]: 'public.extras',
      batch_size: '500',
      idle_timeout: '1',
    });
    expect(saved.status, saved.text).toBe(303);
    await waitFor(async () => (await mirrorState(service, mirror)) === 'STATUS_RUNNING', 60_000, 'resumed');
    await waitFor(
      async () => {
        const { rows } = await destination.client
          .query<{ n: number }>(`SELECT count(*)::int AS n FROM public.extras`)
          .catch(() => ({ rows: [{ n: 0 }] }));
        return rows[0]?.n === 30;
      },
      60_000,
      'the added table loaded',
    );
    const status = await service.call('POST', '/api/v1/mirrors/status', {
      flowJobName: mirror,
      includeFlowInfo: true,
    });
    const config = (
      status.body as { cdcStatus: { config: { maxBatchSize: number; tableMappings: unknown[] } } }
    ).cdcStatus.config;
    expect(config.maxBatchSize).toBe(500);
    expect(config.tableMappings).toHaveLength(2);
  });
});

// POST /api/v1/scripts and GET /api/v1/scripts/:id through app.inject().
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomSuffix } from '../support/databases.ts';
import { createFacade, type Facade } from '../support/facade.ts';

function expectError(response: LightMyRequestResponse, status: number, code: number, message: string): void {
  expect(response.statusCode, response.body).toBe(status);
  expect(response.json()).toEqual({ code, message: expect.stringContaining(message), details: [] });
}

async function stateOf(facade: Facade): Promise<string> {
  const { store } = facade.controlPlane;
  return JSON.stringify({ scripts: await store.listScripts(), mirrors: await store.listMirrors() });
}

describe('scripts', () => {
  let facade: Facade;
  const suffix = randomSuffix();
  const source = 'function onRecord(r) return r end';

  const upsert = (script: unknown) => facade.post('/api/v1/scripts', { script });
  const get = (id: string | number) => facade.request({ method: 'GET', url: `/api/v1/scripts/${id}` });

  async function create(name: string): Promise<number> {
    const response = await upsert({ id: -1, name, lang: 'lua', source });
    expect(response.statusCode, response.body).toBe(200);
    const { id } = response.json() as { id: number };
    expect(Number.isInteger(id)).toBe(true);
    return id;
  }

  beforeAll(async () => {
    facade = await createFacade();
  });

  afterAll(async () => {
    await facade?.close();
  });

  it('creates with id -1, reads one and all, and updates by id', async () => {
    const first = await create(`first-${suffix}`);
    const second = await create(`second-${suffix}`);
    expect(second).not.toBe(first);

    const one = await get(first);
    expect(one.statusCode).toBe(200);
    expect(one.json()).toEqual({ scripts: [{ id: first, name: `first-${suffix}`, lang: 'lua', source }] });

    const all = await get(-1);
    expect(all.statusCode).toBe(200);
    expect(all.json().scripts).toEqual(
      expect.arrayContaining([
        { id: first, name: `first-${suffix}`, lang: 'lua', source },
        { id: second, name: `second-${suffix}`, lang: 'lua', source },
      ]),
    );

    const updatedSource = 'function onRecord(r) r.seen = true return r end';
    const update = await upsert({ id: first, name: `renamed-${suffix}`, lang: 'lua', source: updatedSource });
    expect(update.statusCode).toBe(200);
    expect(update.json()).toEqual({ id: first });
    expect((await get(first)).json()).toEqual({
      scripts: [{ id: first, name: `renamed-${suffix}`, lang: 'lua', source: updatedSource }],
    });
    expect(await facade.controlPlane.store.getScript(first)).toEqual({
      id: first,
      name: `renamed-${suffix}`,
      lang: 'lua',
      source: updatedSource,
    });
  });

  it('takes the language name in any case and stores it lower case', async () => {
    const response = await upsert({ id: -1, name: `upper-${suffix}`, lang: 'LUA', source });
    expect(response.statusCode).toBe(200);
    expect((await get(response.json().id)).json().scripts[0].lang).toBe('lua');
  });

  it('keeps sources with SQL or quotes verbatim', async () => {
    const name = `quoted_${suffix}`;
    const quotedSource = `return "quoted" .. 'single' -- '); DROP TABLE scripts; --`;
    const response = await upsert({ id: -1, name, lang: 'lua', source: quotedSource });
    expect(response.statusCode).toBe(200);
    expect((await get(response.json().id)).json()).toEqual({
      scripts: [{ id: response.json().id, name, lang: 'lua', source: quotedSource }],
    });
    expect((await get(-1)).statusCode).toBe(200);
  });

  it('takes the same names in both modes and refuses the same ones with 400 code 3', async () => {
    const kept = await create(`keep_${suffix}`);
    for (const name of [`_lead_${suffix}`, `under_score-${suffix}`, `${suffix}_9`]) {
      const id = await create(name);
      expect((await get(id)).json().scripts[0].name).toBe(name);
    }
    const before = await stateOf(facade);
    for (const name of [
      `x'; DROP TABLE y; -- ${suffix}`,
      `Upper_${suffix}`,
      `dot.${suffix}`,
      `-lead${suffix}`,
    ]) {
      expectError(await upsert({ id: -1, name, lang: 'lua', source }), 400, 3, 'script.name: ');
      expectError(await upsert({ id: kept, name, lang: 'lua', source }), 400, 3, 'script.name: ');
    }
    expect(await stateOf(facade)).toBe(before);
  });

  it('answers 404 code 5 for an id that does not exist, on read and on update', async () => {
    const before = await stateOf(facade);
    for (const id of [0, 999_999, 2_147_483_647, 2_147_483_648, Number.MAX_SAFE_INTEGER]) {
      expectError(
        await upsert({ id, name: `ghost-${suffix}`, lang: 'lua', source }),
        404,
        5,
        `script ${id} does not exist`,
      );
      expectError(await get(id), 404, 5, `script ${id} does not exist`);
    }
    expect(await stateOf(facade)).toBe(before);
  });

  it('refuses a duplicate name with 409 code 6, on create and on update', async () => {
    const taken = `taken-${suffix}`;
    await create(taken);
    const other = await create(`other-${suffix}`);
    const before = await stateOf(facade);
    expectError(
      await upsert({ id: -1, name: taken, lang: 'lua', source }),
      409,
      6,
      `a script named ${taken} exists`,
    );
    expectError(
      await upsert({ id: other, name: taken, lang: 'lua', source }),
      409,
      6,
      `a script named ${taken} exists`,
    );
    expect(await stateOf(facade)).toBe(before);
  });

  describe('scripts/test: a run on a sample record, saving nothing', () => {
    const record = {
      kind: 'insert',
      new: { id: '1', item: 'bread', note: null },
      row: { id: '1', item: 'bread', note: null },
      source: { schema: 'public', table: 'orders' },
      target: 'public.orders',
    };
    const run = (body: Record<string, unknown>) => facade.post('/api/v1/scripts/test', { record, ...body });

    it('gives the row the script makes, what it printed, and stores nothing', async () => {
      const before = await stateOf(facade);
      const changed = await run({
        name: 'shout',
        source: `function onRecord(r)
  print('saw ' .. r.row.item)
  r.row.item = string.upper(r.row.item)
  return r.row
end`,
      });
      expect(changed.statusCode, changed.body).toBe(200);
      expect(changed.json()).toEqual({
        ok: true,
        form: 'rows',
        row: { drop: false, values: { item: 'BREAD' } },
        printed: ['saw bread'],
      });
      const dropped = await run({ source: 'function onRecord(r) return nil end' });
      expect(dropped.json()).toMatchObject({ ok: true, row: { drop: true } });
      expect(await stateOf(facade)).toBe(before);
    });

    it('reads the result as messages when asked', async () => {
      const answer = await run({
        form: 'messages',
        source: `function onRecord(r) return { topic = 'orders.' .. r.kind, value = r.new.item } end`,
      });
      expect(answer.json()).toEqual({
        ok: true,
        form: 'messages',
        messages: [{ topic: 'orders.insert', value: 'bread' }],
        printed: [],
      });
    });

    it('answers a script that fails with its line, one that does not compile, and one that runs too long', async () => {
      const failing = await run({
        name: 'broken',
        source: 'function onRecord(r)\n  return r.missing.field\nend',
      });
      expect(failing.statusCode).toBe(200);
      expect(failing.json()).toMatchObject({ ok: false, error: expect.stringMatching(/broken:2:/) });
      const unparsable = await run({ name: 'typo', source: 'function onRecord(r) return r' });
      expect(unparsable.json()).toMatchObject({
        ok: false,
        error: expect.stringMatching(/^does not compile: typo:/),
      });
      const endless = await run({ source: 'function onRecord(r) while true do end end' });
      expect(endless.json()).toMatchObject({ ok: false, error: expect.stringContaining('time limit') });
    });

    it('refuses a body without a record with 400 code 3', async () => {
      expectError(await facade.post('/api/v1/scripts/test', { source }), 400, 3, 'record');
    });
  });

  it('refuses an id that is not an integer on read with 400 code 3', async () => {
    for (const id of [
      'abc',
      '1.5',
      '1e3',
      '0x10',
      '%20',
      '-',
      '--1',
      encodeURIComponent(`1'; DROP TABLE y; --`),
    ]) {
      expectError(await get(id), 400, 3, 'id: expected an integer');
    }
  });

  describe('bad input', () => {
    const valid = { id: -1, name: `bad-${suffix}`, lang: 'lua', source };
    const cases: { name: string; body: unknown; message: string }[] = [
      { name: 'an empty body', body: {}, message: 'script: ' },
      // Unknown fields are ignored, so nothing is left of the request.
      { name: 'a script at the top level', body: valid, message: 'script: ' },
      { name: 'a missing id', body: { script: { ...valid, id: undefined } }, message: 'script.id: ' },
      { name: 'an id below -1', body: { script: { ...valid, id: -2 } }, message: 'script.id: ' },
      { name: 'a fractional id', body: { script: { ...valid, id: 1.5 } }, message: 'script.id: ' },
      {
        name: 'an id that is not a number',
        body: { script: { ...valid, id: 'new' } },
        message: 'script.id: ',
      },
      { name: 'a missing name', body: { script: { ...valid, name: undefined } }, message: 'script.name: ' },
      { name: 'an empty name', body: { script: { ...valid, name: '' } }, message: 'script.name: ' },
      {
        name: 'a name over 63 characters',
        body: { script: { ...valid, name: 'n'.repeat(64) } },
        message: 'script.name: ',
      },
      { name: 'a missing lang', body: { script: { ...valid, lang: undefined } }, message: 'script.lang: ' },
      {
        name: 'lang python',
        body: { script: { ...valid, lang: 'python' } },
        message: 'script.lang: unsupported language',
      },
      {
        name: 'lang javascript',
        body: { script: { ...valid, lang: 'javascript' } },
        message: 'script.lang: unsupported language',
      },
      {
        name: 'a missing source',
        body: { script: { ...valid, source: undefined } },
        message: 'script.source: ',
      },
      { name: 'a numeric source', body: { script: { ...valid, source: 42 } }, message: 'script.source: ' },
      {
        name: 'a source over a million characters',
        body: { script: { ...valid, source: 's'.repeat(1_000_001) } },
        message: 'script.source: ',
      },
      { name: 'scripts as an array', body: { script: [valid] }, message: 'script: ' },
      {
        name: 'a source that does not compile',
        body: { script: { ...valid, source: 'function onRecord(r)\n  return r +\nend' } },
        message: `script.source: does not compile: bad-${suffix}:3: unexpected symbol near 'end'`,
      },
      {
        name: 'precompiled bytecode',
        body: { script: { ...valid, source: '\x1bLua' } },
        message: 'script.source: does not compile: ',
      },
    ];

    it.each(cases)('refuses $name with 400 code 3 and changes nothing', async ({ body, message }) => {
      const before = await stateOf(facade);
      expectError(await facade.post('/api/v1/scripts', body), 400, 3, message);
      expect(await stateOf(facade)).toBe(before);
    });
  });

  describe('when scripts are disabled', () => {
    let disabled: Facade;

    beforeAll(async () => {
      disabled = await createFacade({ scriptsEnabled: false });
    });

    afterAll(async () => {
      await disabled?.close();
    });

    it('refuses every upsert with 403 code 7 and changes nothing', async () => {
      for (const body of [
        { script: { id: -1, name: 'n', lang: 'lua', source } },
        { script: { id: 1, name: 'n', lang: 'lua', source } },
        { script: { id: -1, name: 'n', lang: 'python', source } },
        {},
      ]) {
        expectError(
          await disabled.post('/api/v1/scripts', body),
          403,
          7,
          'scripts are disabled on this service',
        );
      }
      expect(await disabled.controlPlane.store.listScripts()).toEqual([]);
    });
  });
});

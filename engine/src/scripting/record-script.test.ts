import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { EngineError } from '../errors.ts';
import { RecordScript } from './record-script.ts';

const logger = pino({ level: 'silent' });
const record = {
  kind: 'insert',
  new: { id: 7, name: 'seven', note: null },
  row: { id: 7, name: 'seven', note: null },
};

async function script(source: string, lines: string[] = []): Promise<RecordScript> {
  const loaded = new RecordScript(
    { name: 'demo', lang: 'lua', source },
    {
      logger,
      log: (level, message) => lines.push(`${level} ${message}`),
      limits: { timeLimitMs: 100, memoryLimitBytes: 8 << 20 },
    },
  );
  await loaded.ready();
  return loaded;
}

async function scriptError(run: () => unknown): Promise<EngineError> {
  try {
    await run();
  } catch (error) {
    expect(error).toBeInstanceOf(EngineError);
    expect((error as EngineError).kind).toBe('script');
    return error as EngineError;
  }
  throw new Error('expected a script error');
}

describe('record scripts', () => {
  it('turns return values into messages', async () => {
    const loaded = await script(`function onRecord(r)
      if r.new.id == 0 then return nil end
      return r.new.name,
        { topic = 'people', key = tostring(r.new.id), value = r.new, partition = 2, headers = { kind = r.kind, tags = { 'a', 'b' } } },
        { key = json.null, value = json.null },
        { },
        nil,
        12
    end`);
    const [messages = []] = await loaded.transform([record]);
    expect(messages).toHaveLength(5);
    expect(messages[0]).toEqual({ value: 'seven' });
    expect(messages[1]).toMatchObject({
      topic: 'people',
      key: '7',
      partition: 2,
      headers: { kind: 'insert', tags: ['a', 'b'] },
    });
    expect(JSON.parse(messages[1]?.value ?? '')).toEqual({ id: 7, name: 'seven', note: null });
    expect(messages[2]).toEqual({ key: null, value: null });
    expect(messages[3]).toEqual({});
    expect(messages[4]).toEqual({ value: '12' });
    expect(await loaded.transform([{ ...record, new: { id: 0 } }])).toEqual([[]]);
  });

  it('answers callers that ask at once in the order they asked', async () => {
    const loaded = await script(`n = 0
      function onRecord(r) n = n + 1 return r.tag .. ':' .. n end`);
    const asked = [loaded.transform([{ tag: 'a' }, { tag: 'a' }]), loaded.transform([{ tag: 'b' }])];
    await Promise.all([loaded.ready(), loaded.ready()]);
    expect(await Promise.all(asked)).toEqual([
      [[{ value: 'a:1' }], [{ value: 'a:2' }]],
      [[{ value: 'b:3' }]],
    ]);
    await loaded.close();
  });

  it('names the script and line of a failure', async () => {
    const loaded = await script(`function onRecord(r)
      return r.old.id
    end`);
    const error = await scriptError(() => loaded.transform([record]));
    expect(error.message).toBe(
      "script demo failed in onRecord: demo:2: attempt to index a nil value (field 'old')",
    );
    const slow = await script(`function onRecord(r)
      while true do end
    end`);
    expect((await scriptError(() => slow.transform([record]))).message).toMatch(
      /^script demo stopped in onRecord: demo:2: script exceeded its time limit of 100 ms$/,
    );
  });

  it('refuses bad scripts and bad results', async () => {
    expect((await scriptError(() => script('x = ('))).message).toMatch(
      /^script demo failed in loading: demo:1:/,
    );
    expect((await scriptError(() => script('function other() end'))).message).toBe(
      'script demo defines no onRecord function',
    );
    const bad = await script(`function onRecord(r)
      if r.kind == 'a' then return true end
      if r.kind == 'b' then return { topic = 3 } end
      if r.kind == 'c' then return { partition = -1 } end
      if r.kind == 'd' then return { value = print } end
      return { headers = { x = {} } }
    end`);
    const cases: [string, RegExp][] = [
      ['a', /onRecord returned a boolean/],
      ['b', /topic is a number/],
      ['c', /partition must be a non-negative integer/],
      ['d', /value is a function/],
      ['e', /header x must be a string or a list of strings/],
    ];
    for (const [kind, message] of cases) {
      expect((await scriptError(() => bad.transform([{ kind }]))).message).toMatch(message);
    }
  });

  it('prints to the mirror log, a bounded number of lines', async () => {
    const lines: string[] = [];
    const loaded = await script(`function onRecord(r) print('saw', r.kind, r.new.id) return nil end`, lines);
    for (let i = 0; i < 50; i++) await loaded.transform([record]);
    expect(lines).toHaveLength(20);
    expect(lines[0]).toBe('INFO script demo: saw\tinsert\t7');
  });
});

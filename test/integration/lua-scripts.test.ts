// Scripts shaping Kafka messages through the real destination and broker:
// renamed topics, chosen keys, filters, fan-out, headers, print, scripts
// that try to leave their sandbox, and scripts that try to hold the engine
// (real wasmoon, real worker threads, a real mirror failing with the error).
import Fastify, { type FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KafkaDestination } from '../../engine/src/connectors/kafka/destination.ts';
import type { KafkaHeld } from '../../engine/src/connectors/kafka/held-messages.ts';
import type { ChangeBatch, DestinationTable, RowChange } from '../../engine/src/connectors/records.ts';
import { rowOfCells } from '../../engine/src/connectors/rows.ts';
import { EngineError, errorPolicy } from '../../engine/src/errors.ts';
import { RecordScript } from '../../engine/src/scripting/record-script.ts';
import { ScriptThreadError } from '../../engine/src/scripting/script-thread.ts';
import { heldBatch } from '../support/batches.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import { createHarness, type Harness, startMirror } from '../support/mirror-harness.ts';
import {
  createTopics,
  deleteTopics,
  kafkaClient,
  randomTopic,
  streamConfig,
  TopicCollector,
} from './kafka-support.ts';

const logger = pino({ level: process.env.TRIBUTARY_TEST_LOG ?? 'silent' });
const client = kafkaClient('PLAINTEXT');
const topics: string[] = [];

const table = (topic: string): DestinationTable => ({
  source: { schema: 'shop', table: 'orders' },
  destination: { schema: 'public', table: topic },
  columns: [
    { name: 'id', typeOid: 23, typeModifier: -1, typeName: 'integer', notNull: true },
    { name: 'status', typeOid: 25, typeModifier: -1, typeName: 'text', notNull: false },
    { name: 'total', typeOid: 1700, typeModifier: -1, typeName: 'numeric', notNull: false },
  ],
  keyColumns: ['id'],
});

const transaction = { xid: 5, commitLsn: 0x5000n, commitTimeMicros: 1_767_225_600_000_000n };

function changes(): RowChange[] {
  return [
    { kind: 'insert', transaction, newRow: rowOfCells(['1', 'new', '10.00']) },
    { kind: 'insert', transaction, newRow: rowOfCells(['2', 'test', '0.00']) },
    { kind: 'update', transaction, oldKey: null, newRow: rowOfCells(['1', 'paid', '10.00']) },
    { kind: 'delete', transaction, oldKey: rowOfCells(['1', null, null]) },
  ];
}

function batchOf(
  destination: KafkaDestination,
  target: DestinationTable,
  mirror: string,
): ChangeBatch<KafkaHeld> {
  return heldBatch(destination, { mirror, batchId: 1n, endLsn: 0x5001n }, [
    { table: target, changes: changes() },
  ]);
}

async function run(script: string, wanted: { topics: string[]; count: number }, logLines: string[] = []) {
  const base = randomTopic('script');
  topics.push(base, ...wanted.topics);
  await createTopics(client, wanted.topics, 1);
  const target = table(base);
  const destination = new KafkaDestination(streamConfig('PLAINTEXT'), {
    mirror: base,
    logger,
    script: { name: 'shaper', lang: 'lua', source: script.replaceAll('BASE', base) },
    log: (level, message) => logLines.push(`${level} ${message}`),
  });
  try {
    await destination.setupTables([target]);
    await destination.syncBatch(batchOf(destination, target, base));
  } finally {
    await destination.close();
  }
  const collector = new TopicCollector(client);
  await collector.start(wanted.topics.length > 0 ? wanted.topics : [base]);
  try {
    await collector.untilCount(wanted.count);
    await new Promise((resolve) => setTimeout(resolve, 300));
    return { base, messages: collector.messages };
  } finally {
    await collector.stop();
  }
}

async function failing(script: string): Promise<EngineError> {
  const base = randomTopic('bad-script');
  topics.push(base);
  const target = table(base);
  const destination = new KafkaDestination(streamConfig('PLAINTEXT'), {
    mirror: base,
    logger,
    script: { name: 'shaper', lang: 'lua', source: script },
    scriptLimits: { timeLimitMs: 200, memoryLimitBytes: 16 * 1024 * 1024 },
  });
  try {
    await destination.setupTables([target]);
    await destination.syncBatch(batchOf(destination, target, base));
  } catch (error) {
    expect(error).toBeInstanceOf(EngineError);
    expect((error as EngineError).kind).toBe('script');
    return error as EngineError;
  } finally {
    await destination.close();
  }
  throw new Error('the script did not fail');
}

afterAll(async () => {
  await deleteTopics(client, topics);
});

describe('Lua scripts on the Kafka destination', () => {
  it('renames topics, sets keys and filters records', async () => {
    const paid = randomTopic('paid');
    const other = randomTopic('other');
    const { base, messages } = await run(
      `function onRecord(r)
         if r.row.status == 'test' then return nil end
         local topic = (r.new and r.new.status == 'paid') and '${paid}' or '${other}'
         return { topic = topic, key = 'order-' .. r.row.id, value = r.kind .. ':' .. r.source.schema .. '.' .. r.source.table .. ':' .. r.target }
       end`,
      { topics: [paid, other], count: 3 },
    );
    const seen = messages.map((m) => [
      m.topic === paid ? 'paid' : 'other',
      m.key,
      m.value?.split(':').slice(0, 2).join(':'),
    ]);
    expect(seen.sort()).toEqual([
      ['other', 'order-1', 'delete:shop.orders'],
      ['other', 'order-1', 'insert:shop.orders'],
      ['paid', 'order-1', 'update:shop.orders'],
    ]);
    // r.target is the default topic, the mapping's destination.
    expect(messages.every((m) => m.value?.split(':')[2] === base)).toBe(true);
  });

  it('fans a record out to several messages with headers, and prints to the mirror log', async () => {
    const audit = randomTopic('audit');
    const lines: string[] = [];
    const { base, messages } = await run(
      `function onRecord(r)
         print('record', r.kind, r.checkpoint, r.lsn, r.xid)
         local default = { value = json.encode({ op = r.kind, id = r.row.id, total = r.row.total }) }
         return default, { topic = '${audit}', key = json.null, value = r.kind, headers = { source = 'shop.orders', commit = r.commit_time } }
       end`,
      { topics: [audit], count: 4 },
      lines,
    );
    expect(messages.map((m) => m.value)).toEqual(['insert', 'insert', 'update', 'delete']);
    expect(messages.every((m) => m.key === null && m.headers.source === 'shop.orders')).toBe(true);
    expect(messages[0]?.headers.commit).toBe('2026-01-01T00:00:00Z');
    expect(lines[0]).toBe('INFO script shaper: record\tinsert\t20480\t0/5000\t5');

    const collector = new TopicCollector(client);
    await collector.start([base]);
    try {
      await collector.untilCount(4);
      expect(collector.messages.map((m) => [m.key, JSON.parse(m.value ?? '{}')])).toEqual([
        ['{"id":1}', { op: 'insert', id: 1, total: '10.00' }],
        ['{"id":2}', { op: 'insert', id: 2, total: '0.00' }],
        ['{"id":1}', { op: 'update', id: 1, total: '10.00' }],
        // A delete's old row holds the key columns only (default replica identity).
        ['{"id":1}', { op: 'delete', id: 1 }],
      ]);
    } finally {
      await collector.stop();
    }
  });

  it('fails the batch with the script line when the script errs, escapes or runs away', async () => {
    const cases: [string, RegExp][] = [
      [
        `function onRecord(r)\n  return r.old.id\nend`,
        /shaper:2: attempt to index a nil value \(field 'old'\)/,
      ],
      [
        `function onRecord(r)\n  os.execute('touch /tmp/pwned')\nend`,
        /shaper:2: attempt to call a nil value \(field 'execute'\)/,
      ],
      [
        `function onRecord(r)\n  return io.open('/etc/passwd'):read('a')\nend`,
        /shaper:2: attempt to index a nil value \(global 'io'\)/,
      ],
      [
        `function onRecord(r)\n  return require('socket')\nend`,
        /shaper:2: attempt to call a nil value \(global 'require'\)/,
      ],
      [
        `function onRecord(r)\n  local chunk = load('\\27Lua', 'x', 'b')\n  return chunk\nend`,
        /shaper:2: load: only text chunks can be loaded/,
      ],
      [
        `function onRecord(r)\n  while true do end\nend`,
        /shaper:2: script exceeded its time limit of 200 ms/,
      ],
      [
        `function onRecord(r)\n  return ('x'):rep(2^30)\nend`,
        /not enough memory: the script may hold at most 16 MiB/,
      ],
      [
        `function onRecord(r)\n  return { topic = 'no spaces allowed' }\nend`,
        /"no spaces allowed" is not a topic it may write: a topic name is/,
      ],
      [
        // Another mirror's checkpoint cannot be forged, nor Kafka's own topics written.
        `function onRecord(r)\n  return { topic = '_tributary_checkpoints', key = 'other-mirror' }\nend`,
        /"_tributary_checkpoints" is not a topic it may write: _tributary_checkpoints holds the mirrors' checkpoints/,
      ],
      [
        `function onRecord(r)\n  return { topic = '__consumer_offsets' }\nend`,
        /"__consumer_offsets" is not a topic it may write: topics starting with "__" are internal to Kafka/,
      ],
      [`onRecord = 42`, /script shaper defines no onRecord function/],
    ];
    for (const [script, message] of cases) {
      expect((await failing(script)).message).toMatch(message);
    }
  });
});

// Scripts whose single call would run far past the limit, most of it inside one
// library call that executes no Lua instruction (so the VM's own hook never runs).
const limits = { timeLimitMs: 200, memoryLimitBytes: 16 * 1024 * 1024 };
const timeLimit = /script exceeded its time limit of 200 ms/;
const outOfMemory = /not enough memory: the script may hold at most 16 MiB/;

/**
 * How many times slower than its CPU time CPU-bound work runs on this machine
 * now (1 on an idle one): the limits count CPU time, so wall-clock bounds of
 * these tests are relative to it and hold on a busy machine too.
 */
function cpuSlowdown(): number {
  const wallStarted = performance.now();
  const cpuStarted = process.threadCpuUsage();
  let cpuMs = 0;
  while (cpuMs < 30) {
    const used = process.threadCpuUsage(cpuStarted);
    cpuMs = (used.user + used.system) / 1000;
  }
  return Math.max(1, (performance.now() - wallStarted) / cpuMs);
}

/** What the engine's thread did while `work` ran: the longest pause of a 10 ms timer, and the HTTP requests it answered. */
async function watchingMainThread<T>(
  url: string,
  work: () => Promise<T>,
): Promise<{ outcome: PromiseSettledResult<T>; longestPauseMs: number; answered: number }> {
  let last = performance.now();
  let longestPauseMs = 0;
  const ticker = setInterval(() => {
    const now = performance.now();
    longestPauseMs = Math.max(longestPauseMs, now - last);
    last = now;
  }, 10);
  let settled = false;
  let answered = 0;
  const asking = (async () => {
    while (!settled) {
      const response = await fetch(url);
      if (response.ok && (await response.text()) === 'pong') answered++;
    }
  })();
  try {
    const [outcome] = await Promise.allSettled([work()]);
    return { outcome: outcome as PromiseSettledResult<T>, longestPauseMs, answered };
  } finally {
    settled = true;
    clearInterval(ticker);
    await asking.catch(() => {});
  }
}

describe('scripts cannot hold the engine', () => {
  let app: FastifyInstance;
  let url: string;

  beforeAll(async () => {
    app = Fastify();
    app.get('/ping', async () => 'pong');
    url = `${await app.listen({ host: '127.0.0.1', port: 0 })}/ping`;
  });

  afterAll(async () => {
    await app?.close();
  });

  const cases: [string, string, RegExp][] = [
    // 400^4 / 24 backtracking steps in one string.find call: about 35 s unbounded on the test machine.
    ['a pathological pattern', `return string.find(('a'):rep(400), '.-.-.-x')`, timeLimit],
    ['a string.rep bomb', `return ('x'):rep(2^30)`, outOfMemory],
    ['a doubling string.rep bomb', `local s = 'xy' for i = 1, 40 do s = s:rep(2) end return s`, outOfMemory],
    // One gsub call that runs a pattern over a large string: a long C call again.
    ['a gsub bomb', `return (('ab'):rep(2^19):gsub('.', '%0%0%0%0'):gsub('.-.-.-z', 'y'))`, timeLimit],
    [
      'deep recursion',
      `local function deeper(n) return 1 + deeper(n + 1) end return deeper(1)`,
      /stack overflow|time limit of 200 ms|not enough memory/,
    ],
    [
      'deep recursion through library calls',
      `local function deeper(s) return (s:gsub('.', deeper)) end return deeper('abc')`,
      /stack overflow/,
    ],
    [
      'a huge table',
      `local t = {} for i = 1, 1e9 do t[i] = { i, tostring(i) } end return #t`,
      /time limit of 200 ms|not enough memory/,
    ],
    [
      'a huge table built in one call',
      `local t = table.pack(string.byte(('x'):rep(2^24), 1, -1)) return t.n`,
      /string slice too long|stack overflow|not enough memory/,
    ],
  ];

  for (const [what, body, expected] of cases) {
    it(`stops ${what} within twice the limit, and the engine's thread stays responsive`, async () => {
      const script = new RecordScript(
        { name: 'bomb', lang: 'lua', source: `function onRecord(r)\n  ${body}\nend` },
        { logger, limits },
      );
      try {
        await script.ready();
        const slowdownBefore = cpuSlowdown();
        let stoppedAfterMs = Number.POSITIVE_INFINITY;
        const watched = await watchingMainThread(url, async () => {
          const started = performance.now();
          try {
            return await script.transform([{ kind: 'insert', new: { id: 1 } }]);
          } finally {
            stoppedAfterMs = performance.now() - started;
          }
        });
        expect(watched.outcome.status).toBe('rejected');
        const error = (watched.outcome as PromiseRejectedResult).reason;
        expect(error).toBeInstanceOf(EngineError);
        expect((error as EngineError).kind).toBe('script');
        expect((error as EngineError).message).toMatch(/^script bomb (stopped|failed) in onRecord: /);
        expect((error as EngineError).message).toMatch(expected);
        // The limit counts the script thread's CPU time: a call its thread's
        // watchdog ended had used at most twice the limit of it.
        const { cause } = error as EngineError;
        const cpuMs = cause instanceof ScriptThreadError ? cause.failure.cpuMs : undefined;
        if ((error as EngineError).message.includes('its thread was terminated')) {
          expect(cpuMs).toBeDefined();
          expect(cpuMs).toBeLessThan(2 * limits.timeLimitMs);
        }
        // In wall-clock time, relative to how much slower than its CPU time
        // work runs on this machine now (sampled around the call, so with
        // room for how the load moved meanwhile).
        const slowdown = Math.max(slowdownBefore, cpuSlowdown());
        expect(stoppedAfterMs).toBeLessThan(4 * limits.timeLimitMs * slowdown);
        // The engine's thread never paused as long as the limit, and answered HTTP meanwhile.
        expect(watched.longestPauseMs).toBeLessThan(2 * limits.timeLimitMs * slowdown);
        if (stoppedAfterMs > limits.timeLimitMs) expect(watched.answered).toBeGreaterThan(0);
      } finally {
        await script.close();
      }
    });
  }

  it('starts a new Lua state after a time-out, which then runs normally', async () => {
    const script = new RecordScript(
      {
        name: 'sometimes',
        lang: 'lua',
        source: `calls = 0
          function onRecord(r)
            calls = calls + 1
            if r.slow then return string.find(('a'):rep(400), '.-.-.-x') end
            return 'call ' .. calls
          end`,
      },
      { logger, limits },
    );
    try {
      await script.ready();
      expect(await script.transform([{}, {}])).toEqual([[{ value: 'call 1' }], [{ value: 'call 2' }]]);
      await expect(script.transform([{}, { slow: true }, {}])).rejects.toThrow(timeLimit);
      await expect(script.transform([{}])).rejects.toThrow(timeLimit);
      await script.ready();
      // A fresh state: the script's globals start over.
      expect(await script.transform([{}])).toEqual([[{ value: 'call 1' }]]);
    } finally {
      await script.close();
    }
  });

  it('times out a script whose loading runs a long library call', async () => {
    const script = new RecordScript(
      {
        name: 'slowload',
        lang: 'lua',
        source: `local found = string.find(('a'):rep(400), '.-.-.-x')\nfunction onRecord(r) return 'x' end`,
      },
      { logger, limits },
    );
    try {
      await expect(script.ready()).rejects.toThrow(
        /^script slowload stopped in loading: script exceeded its time limit of 200 ms/,
      );
    } finally {
      await script.close();
    }
  });

  describe('in a running mirror', () => {
    let harness: Harness;

    beforeAll(async () => {
      harness = await createHarness('luabomb');
    });

    afterAll(async () => {
      await harness?.close();
    });

    it('fails the mirror with the script error and its remedy in its logs, the API answering meanwhile', async () => {
      const topic = randomTopic('bomb');
      topics.push(topic);
      await harness.source.client.query(`CREATE TABLE orders (id int PRIMARY KEY, status text)`);
      await harness.source.client.query(`INSERT INTO orders SELECT g, 'new' FROM generate_series(1, 20) g`);
      const name = `lua-bomb-${randomSuffix()}`;
      const spec = {
        name,
        tableMappings: [
          { source: { schema: 'public', table: 'orders' }, destination: { schema: 'public', table: topic } },
        ],
        doInitialSnapshot: true,
        idleTimeoutSeconds: 1,
      };
      const source = `function onRecord(r)
  if r.new.id == 7 then return string.find(('a'):rep(400), '.-.-.-x') end
  return r.kind
end`;
      const watched = await watchingMainThread(url, async () => {
        const mirror = startMirror(harness, spec, {
          supervised: true,
          wrapDestination: () =>
            new KafkaDestination(streamConfig('PLAINTEXT'), {
              mirror: name,
              logger,
              script: { name: 'orders', lang: 'lua', source },
              scriptLimits: limits,
              log: (level, message) => void harness.catalog.appendLog(name, level, message),
            }),
        });
        try {
          await waitFor(
            async () => (await harness.catalog.getRuntime(name))?.phase === 'failed',
            60_000,
            'the mirror to fail',
          );
        } finally {
          await mirror.stop().catch(() => {});
        }
      });
      expect(watched.outcome.status).toBe('fulfilled');
      const { entries } = await harness.catalog.listLogs({
        mirror: name,
        levels: ['ERROR'],
        offset: 0,
        limit: 10,
      });
      expect(entries.map((entry) => entry.message)).toContainEqual(
        `script orders stopped in onRecord: script exceeded its time limit of 200 ms (its thread was terminated). ${errorPolicy.script.remedy}`,
      );
      expect(errorPolicy.script.retry).toBe('manual');
      expect(watched.longestPauseMs).toBeLessThan(limits.timeLimitMs * cpuSlowdown());
      expect(watched.answered).toBeGreaterThan(0);
    });
  });
});

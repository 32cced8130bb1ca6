// Scripts shaping Kafka messages through the real destination and broker:
// renamed topics, chosen keys, filters, fan-out, headers, print, and scripts
// that try to leave their sandbox.
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { KafkaDestination } from '../../engine/src/connectors/kafka/destination.ts';
import type { ChangeBatch, DestinationTable, RowChange } from '../../engine/src/connectors/records.ts';
import { EngineError } from '../../engine/src/errors.ts';
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
    { kind: 'insert', transaction, newRow: ['1', 'new', '10.00'] },
    { kind: 'insert', transaction, newRow: ['2', 'test', '0.00'] },
    { kind: 'update', transaction, oldKey: null, newRow: ['1', 'paid', '10.00'] },
    { kind: 'delete', transaction, oldKey: ['1', null, null] },
  ];
}

function batchOf(target: DestinationTable, mirror: string): ChangeBatch {
  return {
    mirror,
    batchId: 1n,
    endLsn: 0x5001n,
    tables: [{ table: target, changes: changes() }],
    rowCount: 4,
  };
}

async function run(script: string, wanted: { topics: string[]; count: number }, logLines: string[] = []) {
  const base = randomTopic('script');
  topics.push(base, ...wanted.topics);
  await createTopics(client, wanted.topics, 1);
  const target = table(base);
  const destination = new KafkaDestination(streamConfig('PLAINTEXT'), {
    mirror: base,
    logger,
    client: kafkaClient('PLAINTEXT'),
    script: { name: 'shaper', lang: 'lua', source: script.replaceAll('BASE', base) },
    log: (level, message) => logLines.push(`${level} ${message}`),
  });
  try {
    await destination.setupTables([target]);
    await destination.syncBatch(batchOf(target, base));
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
    client: kafkaClient('PLAINTEXT'),
    script: { name: 'shaper', lang: 'lua', source: script },
    scriptLimits: { timeLimitMs: 200, memoryLimitBytes: 16 * 1024 * 1024 },
  });
  try {
    await destination.setupTables([target]);
    await destination.syncBatch(batchOf(target, base));
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
        /"no spaces allowed" is not a Kafka topic name/,
      ],
      [`onRecord = 42`, /script shaper defines no onRecord function/],
    ];
    for (const [script, message] of cases) {
      expect((await failing(script)).message).toMatch(message);
    }
  });
});

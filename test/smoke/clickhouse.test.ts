// Smoke test of the two ClickHouse engines that scripts/testenv/clickhouse.sh starts:
// Debian's clickhouse-server 18.16 and current ClickHouse (chdb) behind
// test/support/chdb-http-server.ts, both through the official @clickhouse/client.
import { randomBytes } from 'node:crypto';
import {
  type ClickHouseClient,
  type ClickHouseClientConfigOptions,
  ClickHouseLogLevel,
  createClient,
} from '@clickhouse/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clickhouse } from '../support/testenv.ts';

interface Engine {
  readonly name: string;
  readonly config: ClickHouseClientConfigOptions;
  readonly version: RegExp;
}

const engines: readonly Engine[] = [
  {
    name: 'clickhouse-server (Debian 18.16)',
    config: {
      url: clickhouse.server.url,
      username: clickhouse.server.user,
      password: clickhouse.server.password,
    },
    version: /^18\.\d+\.\d+/,
  },
  {
    name: 'chdb HTTP front',
    config: { url: clickhouse.chdb.url },
    version: /^2\d\.\d+\.\d+/,
  },
];

const suffix = (): string => randomBytes(4).toString('hex');

async function rows<T>(client: ClickHouseClient, query: string): Promise<T[]> {
  const result = await client.query({ query, format: 'JSONEachRow' });
  return result.json<T>();
}

/** A client and a fresh, uniquely named database for one describe block; both go away after it. */
function withDatabase(engine: Engine): { client: () => ClickHouseClient; database: string } {
  const database = `tributary_smoke_${suffix()}`;
  let client: ClickHouseClient | undefined;
  beforeAll(async () => {
    client = createClient({ ...engine.config, request_timeout: 30_000 });
    await client.command({ query: `CREATE DATABASE ${database}` });
  });
  afterAll(async () => {
    if (client === undefined) return;
    await client.command({ query: `DROP DATABASE IF EXISTS ${database}` });
    await client.close();
  });
  return {
    database,
    client: () => {
      if (client === undefined) throw new Error('client not created yet');
      return client;
    },
  };
}

describe.each(engines)('$name', (engine) => {
  const env = withDatabase(engine);

  it('answers ping and reports its version', async () => {
    expect((await env.client().ping()).success).toBe(true);
    const [row] = await rows<{ v: string }>(env.client(), 'SELECT version() AS v');
    expect(row?.v).toMatch(engine.version);
  });

  it('keeps only the latest version of each key in ReplacingMergeTree under FINAL', async () => {
    const client = env.client();
    const table = `${env.database}.replacing_${suffix()}`;
    await client.command({
      query: `CREATE TABLE ${table} (id UInt64, name String, version UInt64)
              ENGINE = ReplacingMergeTree(version) ORDER BY id`,
    });
    // One insert per batch, so the versions sit in separate parts until a merge.
    const batches = [
      [
        { id: 1, name: 'one@1', version: 1 },
        { id: 2, name: 'two@1', version: 1 },
        { id: 3, name: 'three@1', version: 1 },
      ],
      [
        { id: 1, name: 'one@3', version: 3 },
        { id: 2, name: 'two@2', version: 2 },
      ],
      // An older version arriving late must not win.
      [
        { id: 1, name: 'one@2', version: 2 },
        { id: 3, name: 'three@5', version: 5 },
      ],
    ];
    for (const values of batches) {
      // JSONEachRow: 18.16 does not know the client's default JSONCompactEachRow.
      await client.insert({ table, values, format: 'JSONEachRow' });
    }
    const latest = await rows<{ id: string; name: string; version: string }>(
      client,
      `SELECT toString(id) AS id, name, toString(version) AS version FROM ${table} FINAL ORDER BY id`,
    );
    expect(latest).toEqual([
      { id: '1', name: 'one@3', version: '3' },
      { id: '2', name: 'two@2', version: '2' },
      { id: '3', name: 'three@5', version: '5' },
    ]);
    await client.command({ query: `DROP TABLE ${table}` });
  });
});

describe('clickhouse-server 18.16 lacks what the connector must fall back from', () => {
  const server = engines[0] as Engine;
  // The expected failures would otherwise each log an error.
  const env = withDatabase({
    ...server,
    config: { ...server.config, log: { level: ClickHouseLogLevel.OFF } },
  });

  it('has no DateTime64, no is_deleted column and no JSONCompactEachRow', async () => {
    const client = env.client();
    await expect(
      client.command({ query: `CREATE TABLE ${env.database}.t64 (ts DateTime64(6)) ENGINE = Memory` }),
    ).rejects.toThrow(/Unknown data type family: DateTime64/);
    await expect(
      client.command({
        query: `CREATE TABLE ${env.database}.deleted (id UInt64, version UInt64, is_deleted UInt8)
                ENGINE = ReplacingMergeTree(version, is_deleted) ORDER BY id`,
      }),
    ).rejects.toThrow(/ReplacingMergeTree requires 0 to 1 parameters/);
    await expect(client.query({ query: 'SELECT 1', format: 'JSONCompactEachRow' })).rejects.toThrow(
      /Unknown format JSONCompactEachRow/,
    );
  });
});

describe('chdb HTTP front: current ClickHouse semantics', () => {
  const engine = engines[1] as Engine;
  const env = withDatabase(engine);

  it('hides rows marked deleted in ReplacingMergeTree(version, is_deleted) under FINAL', async () => {
    const client = env.client();
    const table = `${env.database}.deleted_${suffix()}`;
    await client.command({
      query: `CREATE TABLE ${table} (id UInt64, name String, version UInt64, is_deleted UInt8)
              ENGINE = ReplacingMergeTree(version, is_deleted) ORDER BY id`,
    });
    await client.insert({
      table,
      values: [
        { id: 1, name: 'one', version: 1, is_deleted: 0 },
        { id: 2, name: 'two', version: 1, is_deleted: 0 },
        { id: 3, name: 'three', version: 1, is_deleted: 0 },
      ],
      format: 'JSONEachRow',
    });
    await client.insert({
      table,
      values: [
        { id: 2, name: 'two', version: 2, is_deleted: 1 },
        { id: 3, name: 'three again', version: 3, is_deleted: 0 },
      ],
      format: 'JSONEachRow',
    });
    const visible = await rows<{ id: number; name: string }>(
      client,
      `SELECT id, name FROM ${table} FINAL ORDER BY id`,
    );
    expect(visible).toEqual([
      { id: 1, name: 'one' },
      { id: 3, name: 'three again' },
    ]);
    const [all] = await rows<{ n: number }>(client, `SELECT count() AS n FROM ${table}`);
    expect(all?.n).toBe(5);
  });

  it('round-trips DateTime64(6) with microseconds', async () => {
    const client = env.client();
    const table = `${env.database}.micros_${suffix()}`;
    await client.command({
      query: `CREATE TABLE ${table} (id UInt32, ts DateTime64(6, 'UTC')) ENGINE = MergeTree ORDER BY id`,
    });
    await client.insert({
      table,
      values: [
        { id: 1, ts: '2024-02-29 23:59:59.123456' },
        { id: 2, ts: '1970-01-01 00:00:00.000001' },
      ],
      format: 'JSONEachRow',
    });
    const back = await rows<{ id: number; ts: string; micros: string }>(
      client,
      `SELECT id, ts, toString(toUnixTimestamp64Micro(ts)) AS micros FROM ${table} ORDER BY id`,
    );
    expect(back).toEqual([
      { id: 1, ts: '2024-02-29 23:59:59.123456', micros: '1709251199123456' },
      { id: 2, ts: '1970-01-01 00:00:00.000001', micros: '1' },
    ]);
  });

  it('stores and queries a JSON column', async () => {
    const client = env.client();
    const table = `${env.database}.documents_${suffix()}`;
    await client.command({
      query: `CREATE TABLE ${table} (id UInt32, doc JSON) ENGINE = MergeTree ORDER BY id`,
    });
    await client.insert({
      table,
      values: [
        { id: 1, doc: { name: 'ada', tags: ['x', 'y'], address: { city: 'London' } } },
        { id: 2, doc: { name: 'grace', extra: true } },
      ],
      format: 'JSONEachRow',
    });
    const back = await rows<{ id: number; name: string; city: string | null; doc: string }>(
      client,
      `SELECT id, doc.name::String AS name, doc.address.city::Nullable(String) AS city, toJSONString(doc) AS doc
       FROM ${table} ORDER BY id`,
    );
    expect(back.map(({ id, name, city }) => ({ id, name, city }))).toEqual([
      { id: 1, name: 'ada', city: 'London' },
      { id: 2, name: 'grace', city: null },
    ]);
    expect(JSON.parse(back[0]?.doc ?? 'null')).toEqual({
      address: { city: 'London' },
      name: 'ada',
      tags: ['x', 'y'],
    });
  });
});

// The source browsing additions (GET /api/v1/peers/schemas, /tables, /columns)
// through app.inject(), against a real PostgreSQL source: what a person picking
// a mirror's tables sees, and the refusals of what cannot be browsed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, randomSuffix, type TestDatabase } from '../support/databases.ts';
import { createFacade, type Facade } from '../support/facade.ts';
import { clickhouse, postgres } from '../support/testenv.ts';

describe('source browsing', () => {
  let facade: Facade;
  let database: TestDatabase;
  const peer = `browse-${randomSuffix()}`;

  beforeAll(async () => {
    database = await createTestDatabase('api_browse');
    await database.client.query(`
      CREATE SCHEMA shop;
      CREATE TABLE shop.orders (id bigint PRIMARY KEY, placed date NOT NULL, total numeric(12, 2),
                                doubled numeric GENERATED ALWAYS AS (total * 2) STORED);
      CREATE TABLE shop.notes (body text);
      CREATE TABLE shop.audit (body text);
      ALTER TABLE shop.audit REPLICA IDENTITY FULL;
      CREATE TABLE shop.lines (order_id bigint NOT NULL, line int NOT NULL, sku text);
      CREATE UNIQUE INDEX lines_key ON shop.lines (order_id, line);
      ALTER TABLE shop.lines REPLICA IDENTITY USING INDEX lines_key;
      CREATE TABLE shop.events (id bigint, k int, PRIMARY KEY (id, k)) PARTITION BY RANGE (k);
      CREATE TABLE shop.events_low PARTITION OF shop.events FOR VALUES FROM (0) TO (100);
      INSERT INTO shop.events SELECT g, g % 100 FROM generate_series(1, 1000) g`);
    facade = await createFacade();
    const created = await facade.post('/api/v1/peers/create', {
      peer: {
        name: peer,
        type: 3,
        relational_config: {
          host: postgres.host,
          port: postgres.port,
          user: postgres.superuser.user,
          password: postgres.superuser.password,
          database: database.name,
        },
      },
    });
    expect(created.statusCode, created.body).toBe(200);
  });

  afterAll(async () => {
    await facade?.close();
    await database?.drop();
  });

  const get = (url: string) => facade.request({ method: 'GET', url });

  it('lists the schemas a user may use, without the system ones', async () => {
    const response = await get(`/api/v1/peers/schemas?peer_name=${peer}`);
    expect(response.statusCode, response.body).toBe(200);
    const { schemas } = response.json() as { schemas: string[] };
    expect(schemas).toEqual(expect.arrayContaining(['public', 'shop']));
    expect(schemas.filter((schema) => schema.startsWith('pg_') || schema === 'information_schema')).toEqual(
      [],
    );
    // The other spelling of the parameter, as protobuf JSON allows.
    expect((await get(`/api/v1/peers/schemas?peerName=${peer}`)).json()).toEqual({ schemas });
  });

  it('lists a schema’s tables with what replicating each takes', async () => {
    const response = await get(`/api/v1/peers/tables?peer_name=${peer}&schema_name=shop`);
    expect(response.statusCode, response.body).toBe(200);
    const { tables } = response.json() as { tables: Record<string, unknown>[] };
    const byName = new Map(tables.map((table) => [table.tableName, table]));
    expect(tables.map((table) => table.tableName)).toEqual([
      'audit',
      'events',
      'events_low',
      'lines',
      'notes',
      'orders',
    ]);
    expect(byName.get('orders')).toMatchObject({
      canMirror: true,
      hasPrimaryKey: true,
      replicaIdentity: 'REPLICA_IDENTITY_DEFAULT',
      partitioned: false,
      partition: false,
    });
    expect(byName.get('notes')).toMatchObject({ canMirror: false, hasPrimaryKey: false });
    expect(byName.get('audit')).toMatchObject({ canMirror: true, replicaIdentity: 'REPLICA_IDENTITY_FULL' });
    expect(byName.get('lines')).toMatchObject({ canMirror: true, replicaIdentity: 'REPLICA_IDENTITY_INDEX' });
    expect(byName.get('events')).toMatchObject({ canMirror: true, partitioned: true });
    expect(byName.get('events_low')).toMatchObject({ partition: true });
    // A partitioned table's size is its partitions'.
    expect(Number(byName.get('events')?.tableSize)).toBeGreaterThan(0);
    expect(Number(byName.get('events')?.tableSize)).toBeGreaterThanOrEqual(
      Number(byName.get('events_low')?.tableSize),
    );
    expect((await get(`/api/v1/peers/tables?peer_name=${peer}&schema_name=nowhere`)).json()).toEqual({
      tables: [],
    });
  });

  it('lists a table’s columns in order, its key and its generated columns', async () => {
    const response = await get(`/api/v1/peers/columns?peer_name=${peer}&schema_name=shop&table_name=orders`);
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json()).toEqual({
      columns: [
        { name: 'id', type: 'bigint', isKey: true, generated: false },
        { name: 'placed', type: 'date', isKey: false, generated: false },
        { name: 'total', type: 'numeric(12,2)', isKey: false, generated: false },
        { name: 'doubled', type: 'numeric', isKey: false, generated: true },
      ],
    });
    const lines = await get(`/api/v1/peers/columns?peerName=${peer}&schemaName=shop&tableName=lines`);
    expect(
      (lines.json() as { columns: { name: string; isKey: boolean }[] }).columns.map((column) => [
        column.name,
        column.isKey,
      ]),
    ).toEqual([
      ['order_id', true],
      ['line', true],
      ['sku', false],
    ]);
  });

  it('refuses what it cannot browse, with the reason', async () => {
    const missing = await get(`/api/v1/peers/schemas?peer_name=nobody-${randomSuffix()}`);
    expect(missing.statusCode).toBe(404);
    expect(missing.json().message).toMatch(/does not exist/);
    const noSchema = await get(`/api/v1/peers/tables?peer_name=${peer}`);
    expect(noSchema.statusCode).toBe(400);
    expect(noSchema.json().message).toMatch(/schema_name/);
    const analytics = `browse-ch-${randomSuffix()}`;
    const created = await facade.post('/api/v1/peers/create', {
      peer: {
        name: analytics,
        type: 8,
        analytics_config: {
          host: '127.0.0.1',
          port: clickhouse.server.nativePort,
          http_port: Number(new URL(clickhouse.server.url).port),
          user: clickhouse.server.user,
          password: clickhouse.server.password,
          database: 'default',
          disable_tls: true,
        },
      },
    });
    expect(created.statusCode, created.body).toBe(200);
    const notSource = await get(`/api/v1/peers/schemas?peer_name=${analytics}`);
    expect(notSource.statusCode).toBe(400);
    expect(notSource.json().message).toMatch(/not a PostgreSQL peer/);
  });
});

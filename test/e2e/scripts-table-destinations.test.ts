// A mirror's script on table destinations (docs/scripts.md, "Table
// destinations"): the pipeline's script stage lowers a column and drops rows
// of the initial load and of CDC, into PostgreSQL and into both ClickHouse
// engines; a script that changes a key fails the mirror with a script error.
import { randomBytes } from 'node:crypto';
import { type ClickHouseClient, ClickHouseLogLevel, createClient } from '@clickhouse/client';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClickHouseDestination } from '../../engine/src/connectors/clickhouse/destination.ts';
import type { Destination } from '../../engine/src/connectors/destination.ts';
import { withScriptStage } from '../../engine/src/pipeline/script-stage.ts';
import { mirrorSpecSchema } from '../../engine/src/resources/mirror.ts';
import { clickhouseEngines } from '../support/clickhouse-engines.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import {
  createHarness,
  type Harness,
  mapping,
  type SpecInput,
  startMirror,
} from '../support/mirror-harness.ts';

const logger = pino({ level: 'silent' });

const lowerAndDropTests = `
function onRecord(r)
  if r.row.status == 'test' then return nil end
  if r.new then r.new.email = string.lower(r.new.email) end
  return r.new or true
end`;

function scripted(source: string) {
  return (destination: Destination) =>
    withScriptStage(destination, { script: { name: 'orders', lang: 'lua', source }, logger });
}

/** The rows a source of `rows` should leave at the destination after the script. */
const expected = [
  ['1', 'ann@example.com', 'paid'],
  ['3', 'bo@x.org', 'open'],
  ['4', 'new@case.io', 'open'],
];

async function fillSource(harness: Harness, table: string): Promise<void> {
  await harness.source.client.query(`CREATE TABLE ${table} (id int PRIMARY KEY, email text, status text)`);
  await harness.source.client.query(
    `INSERT INTO ${table} VALUES (1, 'Ann@Example.COM', 'paid'), (2, 'T@x', 'test'), (3, 'BO@x.org', 'new')`,
  );
}

/** CDC after the initial load: an insert kept, one dropped, an update whose new email is lowered. */
async function changeSource(harness: Harness, table: string): Promise<void> {
  await harness.source.client.query(
    `INSERT INTO ${table} VALUES (4, 'New@Case.IO', 'open'), (5, 'x', 'test')`,
  );
  await harness.source.client.query(`UPDATE ${table} SET status = 'open' WHERE id = 3`);
}

async function pgRows(harness: Harness, table: string): Promise<string[][]> {
  const result = await harness.destination.client.query<string[]>({
    text: `SELECT id::text, email, status FROM ${table} ORDER BY id`,
    rowMode: 'array',
  });
  return result.rows;
}

describe('a script on a PostgreSQL destination', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await createHarness('scripts_pg');
  });
  afterAll(async () => {
    await harness?.close();
  });

  it('changes values and drops rows of the initial load and of CDC', async () => {
    await fillSource(harness, 'orders');
    const spec: SpecInput = {
      name: `script-pg-${randomSuffix()}`,
      tableMappings: [mapping('orders')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const mirror = startMirror(harness, spec, { wrapDestination: scripted(lowerAndDropTests) });
    const rows = () => pgRows(harness, 'orders');
    await waitFor(async () => (await rows()).length === 2, 30_000, 'the initial load');
    expect(await rows()).toEqual([
      ['1', 'ann@example.com', 'paid'],
      ['3', 'bo@x.org', 'new'],
    ]);
    await changeSource(harness, 'orders');
    await waitFor(async () => JSON.stringify(await rows()) === JSON.stringify(expected), 30_000, 'CDC');
    expect(await rows()).toEqual(expected);
    await mirror.stop();
  });

  it('fails the mirror with a script error when the script changes a key', async () => {
    await harness.source.client.query(`CREATE TABLE rekeyed (id int PRIMARY KEY, email text, status text)`);
    const spec: SpecInput = {
      name: `script-key-${randomSuffix()}`,
      tableMappings: [mapping('rekeyed')],
      doInitialSnapshot: false,
      idleTimeoutSeconds: 1,
    };
    const mirror = startMirror(harness, spec, {
      wrapDestination: scripted(`function onRecord(r) r.row.id = r.row.id + 1 return r.row end`),
    });
    await waitFor(
      async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'running',
      30_000,
      'running',
    );
    await harness.source.client.query(`INSERT INTO rekeyed VALUES (1, 'a', 'b')`);
    await expect(mirror.done).rejects.toMatchObject({
      kind: 'script',
      message:
        "script orders: onRecord changed key column id of public.rekeyed; a script cannot change a row's key",
    });
    expect(await pgRows(harness, 'rekeyed')).toEqual([]);
  });
});

describe.each(clickhouseEngines)('a script on a ClickHouse destination ($name)', (engine) => {
  let harness: Harness;
  let admin: ClickHouseClient;
  const database = `tributary_scripts_${randomBytes(4).toString('hex')}`;
  const config = engine.config(database);

  beforeAll(async () => {
    harness = await createHarness('scripts_ch');
    admin = createClient({
      url: `http://127.0.0.1:${config.httpPort}`,
      username: config.user,
      password: config.password,
      log: { level: ClickHouseLogLevel.OFF },
    });
    await admin.command({ query: `CREATE DATABASE ${database}` });
  });
  afterAll(async () => {
    await admin?.command({ query: `DROP DATABASE IF EXISTS ${database}` });
    await admin?.close();
    await harness?.close();
  });

  async function rows(): Promise<string[][]> {
    const result = await admin.query({
      query: `SELECT toString(id) AS id, email, status FROM ${database}.orders FINAL ORDER BY id`,
      format: 'JSONEachRow',
    });
    const read = await result.json<{ id: string; email: string; status: string }>();
    return read.map((row) => [row.id, row.email, row.status]);
  }

  it('changes values and drops rows of the initial load and of CDC', async () => {
    await fillSource(harness, 'orders');
    const spec: SpecInput = {
      name: `script-ch-${randomSuffix()}`,
      tableMappings: [mapping('orders')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const destination = new ClickHouseDestination(config, {
      mirror: spec.name,
      mirrorColumns: {},
      tableMappings: mirrorSpecSchema.parse({ ...spec, sourcePeer: 's', destinationPeer: 'd' }).tableMappings,
      maxBatchSize: 1_000_000,
      logger,
    });
    const mirror = startMirror(harness, spec, {
      wrapDestination: () => scripted(lowerAndDropTests)(destination),
    });
    await waitFor(async () => (await rows()).length === 2, 30_000, 'the initial load');
    expect(await rows()).toEqual([
      ['1', 'ann@example.com', 'paid'],
      ['3', 'bo@x.org', 'new'],
    ]);
    await changeSource(harness, 'orders');
    await waitFor(async () => JSON.stringify(await rows()) === JSON.stringify(expected), 30_000, 'CDC');
    expect(await rows()).toEqual(expected);
    await mirror.stop();
  });
});

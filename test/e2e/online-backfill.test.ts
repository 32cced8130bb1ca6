// Tables added to a running mirror load online (docs/engine.md, "Tables added
// to a running mirror"): the existing tables keep streaming while an added
// table of 200,000 rows is copied in chunks interleaved with the stream, under
// inserts, updates (key-changing ones and unchanged-TOAST ones too) and
// deletes of the added table; it ends equal to the source row by row. Then the
// same through kill -9s of engine processes during the load.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RelationalConfig } from '../../engine/src/resources/peer.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import { exited, startEngine, writeEngineConfig } from '../support/engine-process.ts';
import {
  createHarness,
  dropMirror,
  type Harness,
  mapping,
  type SpecInput,
  startMirror,
} from '../support/mirror-harness.ts';

const addedRows = 200_000;

/** A seeded generator so a failing run can be reproduced from its logged seed. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1_664_525 + 1_013_904_223) >>> 0;
    return state / 2 ** 32;
  };
}

async function connect(config: RelationalConfig): Promise<pg.Client> {
  const client = new pg.Client({
    host: config.host,
    port: config.port,
    user: config.user,
    password: config.password,
    database: config.database,
  });
  // The harness drops the database with its connections at the end.
  client.on('error', () => {});
  await client.connect();
  return client;
}

/** Every row as its key and a digest of the whole row, in key order: compared row by row. */
async function rowDigests(client: pg.Client, table: string, orderBy: string): Promise<string[]> {
  const result = await client.query<{ row: string }>(
    `SELECT (${orderBy})::text || ' ' || md5(row_to_json(t)::text) AS row FROM ${table} t ORDER BY ${orderBy}`,
  );
  return result.rows.map((row) => row.row);
}

async function expectEqualRows(harness: Harness, table: string, orderBy: string, timeoutMs: number) {
  const same = async () =>
    JSON.stringify(await rowDigests(harness.source.client, table, orderBy)) ===
    JSON.stringify(await rowDigests(harness.destination.client, table, orderBy));
  await waitFor(same, timeoutMs, `${table} to match`).catch(() => {});
  const source = await rowDigests(harness.source.client, table, orderBy);
  const destination = await rowDigests(harness.destination.client, table, orderBy);
  const onlySource = new Set(source);
  for (const row of destination) onlySource.delete(row);
  const onlyDestination = new Set(destination);
  for (const row of source) onlyDestination.delete(row);
  // The rows that differ, whole, from both sides: what a failure needs to be understood.
  const keys = [...onlySource, ...onlyDestination].slice(0, 10).map((row) => row.split(' ')[0]);
  if (keys.length > 0) {
    const whole = `SELECT row_to_json(t)::text AS row FROM ${table} t WHERE (${orderBy})::text = ANY($1)`;
    console.info(`${table} rows that differ`, {
      source: (await harness.source.client.query(whole, [keys])).rows,
      destination: (await harness.destination.client.query(whole, [keys])).rows,
    });
  }
  expect([...onlyDestination]).toEqual([]);
  expect([...onlySource]).toEqual([]);
}

async function createTables(source: pg.Client) {
  await source.query(`CREATE TABLE existing (id bigint PRIMARY KEY, v int NOT NULL)`);
  await source.query(`INSERT INTO existing SELECT g, g FROM generate_series(1, 100) g`);
  await source.query(`CREATE TABLE added (id int PRIMARY KEY, v int NOT NULL, payload text)`);
  // Stored out of line, so an update that leaves it alone streams it as unchanged TOAST.
  await source.query(`ALTER TABLE added ALTER COLUMN payload SET STORAGE EXTERNAL`);
  await source.query(
    `INSERT INTO added SELECT g, g, CASE WHEN g % 1000 = 0 THEN repeat(md5(g::text), 200) ELSE 'p' || g END
     FROM generate_series(1, ${addedRows}) g`,
  );
  // A text key, compared by its bytes: ASCII, accents, CJK and characters beyond the BMP.
  await source.query(`CREATE TABLE added_text (k text PRIMARY KEY, v int NOT NULL)`);
  await source.query(
    `INSERT INTO added_text SELECT (ARRAY['a', 'Z', 'é', '中', '😀', 'b '])[1 + g % 6] || g, g
     FROM generate_series(1, 20000) g`,
  );
  await source.query(`ANALYZE`);
}

/**
 * Writes into the added tables until stopped: inserts above the loaded keys,
 * updates of any row (some leave the TOASTed payload unchanged), key-changing
 * updates both ways across the keyspace, and deletes.
 */
function startWriter(client: pg.Client, next: () => number) {
  let writing = true;
  let writes = 0;
  let nextId = addedRows + 1;
  let moves = 0;
  const done = (async () => {
    while (writing) {
      const id = 1 + Math.floor(next() * addedRows);
      const choice = next();
      await client.query('BEGIN');
      if (choice < 0.3) {
        await client.query(`INSERT INTO added VALUES ($1, 0, 'new')`, [nextId++]);
      } else if (choice < 0.55) {
        await client.query(`UPDATE added SET v = v + 1 WHERE id = $1`, [id]);
      } else if (choice < 0.65) {
        // A row with a TOASTed payload: updated without it (the payload streams as unchanged TOAST).
        const toasted = 1000 * (1 + Math.floor(next() * (addedRows / 1000)));
        await client.query(`UPDATE added SET v = v - 1 WHERE id = $1`, [toasted]);
        // A high one's key changed without it too: while the backfill's frontier is below
        // it, to below the frontier (the new key is read again from the source), else from
        // the destination's row under the old key; or further up.
        if (toasted > 150_000) {
          const to = next() < 0.5 ? -toasted : toasted + 2_000_000;
          await client.query(`UPDATE added SET id = $2 WHERE id = $1`, [toasted, to]);
        }
      } else if (choice < 0.8) {
        // A key-changing update of a row without a TOASTed payload (see above), to a
        // key above the table's keys or below them.
        const to = next() < 0.5 ? 1_000_000 + moves++ : -(1_000_000 + moves++);
        await client.query(`UPDATE added SET id = $2 WHERE id = $1`, [id % 1000 === 0 ? id + 1 : id, to]);
      } else if (choice < 0.95) {
        await client.query(`DELETE FROM added WHERE id = $1`, [id]);
      } else {
        await client.query(`UPDATE added_text SET v = v + 1 WHERE v = $1`, [Math.floor(next() * 20000)]);
        await client.query(`DELETE FROM added_text WHERE v = $1`, [Math.floor(next() * 20000)]);
        await client.query(`INSERT INTO added_text VALUES ($1, 0) ON CONFLICT DO NOTHING`, [
          `new ${nextId++} ü`,
        ]);
      }
      if (next() < 0.1)
        await client.query(`UPDATE existing SET v = v + 1 WHERE id = $1`, [1 + Math.floor(next() * 100)]);
      await client.query('COMMIT');
      writes++;
    }
  })();
  return {
    get writes() {
      return writes;
    },
    async stop() {
      writing = false;
      await done;
    },
  };
}

/** Inserts a row into the existing table and waits until the destination has it: the milliseconds that took. */
async function markerLatency(harness: Harness, id: number): Promise<number> {
  const started = performance.now();
  await harness.source.client.query(`INSERT INTO existing VALUES ($1, $2)`, [id, id]);
  await waitFor(
    async () =>
      (await harness.destination.client.query(`SELECT 1 FROM existing WHERE id = $1`, [id])).rows.length > 0,
    60_000,
    `row ${id} of the existing table at the destination`,
  );
  return Math.round(performance.now() - started);
}

async function tableState(harness: Harness, mirror: string, table: string) {
  return (await harness.catalog.listTables(mirror)).find((entry) => entry.sourceTable === table)?.state;
}

describe('online load of added tables', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness('backfill');
  });

  afterAll(async () => {
    await harness?.close();
  });

  it('streams the existing tables while an added table loads under writes, and ends equal row by row', async () => {
    const seed = Date.now() % 100_000;
    console.info(`online backfill seed ${seed}`);
    const next = random(seed);
    const { source } = harness;
    await createTables(source.client);
    const spec: SpecInput = {
      name: `backfill-${randomSuffix()}`,
      tableMappings: [mapping('existing')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
      streaming: true,
    };
    const first = startMirror(harness, spec);
    await waitFor(
      async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'running',
      60_000,
      'running',
    );
    // How long a row of the existing table takes to reach the destination without a load, for comparison.
    const latencyBefore: number[] = [];
    for (let marker = 1; marker <= 5; marker++)
      latencyBefore.push(await markerLatency(harness, 900 + marker));
    expect(await first.stop()).toBe('stopped');

    const writerClient = await connect(source.config);
    const writer = startWriter(writerClient, next);
    const edited: SpecInput = {
      ...spec,
      tableMappings: [mapping('existing'), mapping('added'), mapping('added_text')],
    };
    const second = startMirror(harness, edited);
    try {
      // Rows written into the existing table while the added one loads arrive
      // before its load is done: CDC does not wait for it.
      const arrivals: {
        marker: number;
        addedState: string | undefined;
        rowsCopied: bigint;
        latencyMs: number;
      }[] = [];
      await waitFor(
        async () => (await tableState(harness, spec.name, 'public.added')) === 'loading',
        60_000,
        'the added table loading',
      );
      expect((await harness.catalog.getRuntime(spec.name))?.phase).toBe('running');
      for (let marker = 1; marker <= 5; marker++) {
        const latencyMs = await markerLatency(harness, 1000 + marker);
        const progress = await harness.catalog.listSnapshotProgress(spec.name);
        arrivals.push({
          marker,
          addedState: await tableState(harness, spec.name, 'public.added'),
          rowsCopied: progress.find((entry) => entry.sourceTable === 'public.added')?.rowsSynced ?? 0n,
          latencyMs,
        });
      }
      console.info(
        `existing table, insert to visible (ms): without a load ${latencyBefore.join(', ')}; during the load ${arrivals.map((arrival) => arrival.latencyMs).join(', ')}`,
      );
      console.info('markers arrived while public.added was', arrivals);
      expect(arrivals.map((arrival) => arrival.addedState)).toEqual(Array(5).fill('loading'));

      await waitFor(
        async () =>
          (await tableState(harness, spec.name, 'public.added')) === 'streaming' &&
          (await tableState(harness, spec.name, 'public.added_text')) === 'streaming',
        300_000,
        'the added tables loaded',
      );
      const writesDuringLoad = writer.writes;
      await writer.stop();
      console.info(`${writesDuringLoad} transactions written into the added tables during their load`);
      expect(writesDuringLoad).toBeGreaterThan(0);
      // And after: a change of the loaded table is streamed.
      await source.client.query(`UPDATE added SET v = 424242 WHERE id = (SELECT min(id) FROM added)`);
      await expectEqualRows(harness, 'added', 'id', 120_000);
      await expectEqualRows(harness, 'added_text', 'k COLLATE "C"', 60_000);
      await expectEqualRows(harness, 'existing', 'id', 60_000);
      const progress = await harness.catalog.listSnapshotProgress(spec.name);
      expect(progress.find((entry) => entry.sourceTable === 'public.added')?.consolidateCompleted).toBe(true);
      const logs = await harness.catalog.listLogs({ mirror: spec.name, offset: 0, limit: 100 });
      expect(
        logs.entries.some((entry) => entry.message.includes('loaded added table public.added online')),
      ).toBe(true);
    } finally {
      await writer.stop();
      await writerClient.end();
      await second.stop();
      await dropMirror(harness, edited);
    }
  }, 600_000);

  it('loads an added table on a source that writes nothing meanwhile', async () => {
    // Nothing commits during the load: each chunk enters at a keepalive the engine asks for.
    const { source } = harness;
    await source.client.query(`CREATE TABLE quiet_first (id int PRIMARY KEY)`);
    await source.client.query(`CREATE TABLE quiet_added (id bigint PRIMARY KEY, v text)`);
    await source.client.query(`INSERT INTO quiet_added SELECT g, 'v' || g FROM generate_series(1, 3500) g`);
    const spec: SpecInput = {
      name: `quiet-${randomSuffix()}`,
      tableMappings: [mapping('quiet_first')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const first = startMirror(harness, spec);
    await waitFor(
      async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'running',
      60_000,
      'running',
    );
    expect(await first.stop()).toBe('stopped');
    const edited: SpecInput = { ...spec, tableMappings: [mapping('quiet_first'), mapping('quiet_added')] };
    const second = startMirror(harness, edited);
    try {
      await waitFor(
        async () => (await tableState(harness, spec.name, 'public.quiet_added')) === 'streaming',
        60_000,
        'the quiet table loaded',
      );
      await expectEqualRows(harness, 'quiet_added', 'id', 10_000);
    } finally {
      await second.stop();
      await dropMirror(harness, edited);
    }
  });

  it('resumes an online load across kill -9s of the engine, and ends equal row by row', async () => {
    const seed = Date.now() % 100_000;
    console.info(`online backfill crash seed ${seed}`);
    const next = random(seed);
    const { source } = harness;
    await source.client.query(`DROP TABLE IF EXISTS existing, added, added_text`);
    await harness.destination.client.query(`DROP TABLE IF EXISTS existing, added, added_text`);
    await createTables(source.client);
    const mirror = `backfill-crash-${randomSuffix()}`;
    const spec = {
      name: mirror,
      sourcePeer: 'source',
      destinationPeer: 'destination',
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
      maxBatchSize: 2000,
    };
    const firstConfig = writeEngineConfig(harness, { ...spec, tableMappings: [mapping('existing')] });
    const first = startEngine(mirror, firstConfig);
    await waitFor(
      async () => (await harness.catalog.getRuntime(mirror))?.phase === 'running',
      60_000,
      'running',
    );
    first.kill('SIGTERM');
    expect(await exited(first)).toBe(0);

    const config = writeEngineConfig(harness, {
      ...spec,
      tableMappings: [mapping('existing'), mapping('added'), mapping('added_text')],
    });
    const writerClient = await connect(source.config);
    const writer = startWriter(writerClient, next);
    let kills = 0;
    try {
      for (let round = 0; round < 3; round++) {
        const engine = startEngine(mirror, config);
        // Killed once some rows of this run are copied, at a random point after.
        const copiedBefore =
          (await harness.catalog.listSnapshotProgress(mirror)).find((e) => e.sourceTable === 'public.added')
            ?.rowsSynced ?? 0n;
        await waitFor(
          async () =>
            ((await harness.catalog.listSnapshotProgress(mirror)).find(
              (e) => e.sourceTable === 'public.added',
            )?.rowsSynced ?? 0n) > copiedBefore,
          120_000,
          'rows copied in this run',
        );
        await new Promise((resolve) => setTimeout(resolve, Math.floor(next() * 1500)));
        const state = await tableState(harness, mirror, 'public.added');
        engine.kill('SIGKILL');
        await exited(engine);
        if (state === 'loading') kills++;
      }
      console.info(`${kills} kill -9s landed during the load`);
      expect(kills).toBeGreaterThanOrEqual(2);
      const last = startEngine(mirror, config);
      try {
        await waitFor(
          async () =>
            (await tableState(harness, mirror, 'public.added')) === 'streaming' &&
            (await tableState(harness, mirror, 'public.added_text')) === 'streaming',
          300_000,
          'the added tables loaded',
        );
        await writer.stop();
        await expectEqualRows(harness, 'added', 'id', 120_000);
        await expectEqualRows(harness, 'added_text', 'k COLLATE "C"', 60_000);
        await expectEqualRows(harness, 'existing', 'id', 60_000);
        const logs = await harness.catalog.listLogs({ mirror, offset: 0, limit: 200 });
        expect(
          logs.entries.some((entry) => entry.message.includes('resuming the online load of public.added')),
        ).toBe(true);
      } finally {
        last.kill('SIGTERM');
        expect(await exited(last)).toBe(0);
      }
    } finally {
      await writer.stop();
      await writerClient.end();
      await dropMirror(harness, {
        name: mirror,
        tableMappings: [mapping('existing')],
        doInitialSnapshot: true,
      });
    }
  }, 900_000);
});

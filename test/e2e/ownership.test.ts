// A mirror never touches what it did not create: a slot, a publication or a
// populated destination table that was there before it is refused (unless the
// spec adopts it or asks for a resync), left as it was, and kept on drop.
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresCatalog } from '../../engine/src/catalog/postgres-catalog.ts';
import { ReplicationStream } from '../../engine/src/connectors/postgres/source/replication-stream.ts';
import { defaultPublicationName, defaultSlotName } from '../../engine/src/connectors/postgres/source/slot.ts';
import {
  createTestDatabase,
  droppablePool,
  randomSuffix,
  type TestDatabase,
  waitFor,
} from '../support/databases.ts';
import {
  createHarness,
  dropMirror,
  expectSameRows,
  type Harness,
  mapping,
  type SpecInput,
  startMirror,
} from '../support/mirror-harness.ts';

/**
 * Runs a mirror that must refuse to start: its failure, or a plain error when
 * it is still running after 30 s (then it is stopped, so nothing outlives the test).
 */
async function refusal(harness: Harness, spec: SpecInput): Promise<unknown> {
  const mirror = startMirror(harness, spec);
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`mirror ${spec.name} was not refused within 30 s`)), 30_000);
  });
  try {
    return await Promise.race([mirror.done, deadline]);
  } finally {
    clearTimeout(timer);
    await mirror.stop().catch(() => {});
  }
}

interface SlotView {
  confirmed: string | null;
  active_pid: number | null;
  plugin: string;
}

describe('ownership of source and destination objects', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness('own');
  });

  afterAll(async () => {
    await harness?.close();
  });

  async function slot(name: string): Promise<SlotView | undefined> {
    const result = await harness.source.client.query<SlotView>(
      `SELECT confirmed_flush_lsn::text AS confirmed, active_pid, plugin FROM pg_replication_slots WHERE slot_name = $1`,
      [name],
    );
    return result.rows[0];
  }

  async function publicationExists(name: string): Promise<boolean> {
    const result = await harness.source.client.query(`SELECT 1 FROM pg_publication WHERE pubname = $1`, [
      name,
    ]);
    return result.rowCount === 1;
  }

  async function sourceTable(name: string, rows: number): Promise<void> {
    await harness.source.client.query(`CREATE TABLE ${name} (id int PRIMARY KEY, v text)`);
    await harness.source.client.query(
      `INSERT INTO ${name} SELECT g, 'v' || g FROM generate_series(1, ${rows}) g`,
    );
  }

  it('refuses a foreign slot with an active reader under its name and leaves slot and reader alone', async () => {
    await sourceTable('guarded', 10);
    const foreign = `foreign_${randomSuffix()}`;
    await harness.source.client.query(`CREATE PUBLICATION ${foreign} FOR TABLE guarded`);
    await harness.source.client.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [foreign]);
    // Another tool reading the slot, as Debezium would.
    const reader = await ReplicationStream.start(harness.source.config, {
      slotName: foreign,
      publicationName: foreign,
      startLsn: 0n,
      applicationName: 'foreign-reader',
    });
    try {
      await waitFor(async () => (await slot(foreign))?.active_pid != null, 10_000, 'the reader to attach');
      const before = await slot(foreign);
      await harness.source.client.query(`INSERT INTO guarded VALUES (11, 'later')`);

      for (const doInitialSnapshot of [true, false]) {
        const spec: SpecInput = {
          name: `refuse-${randomSuffix()}`,
          tableMappings: [mapping('guarded')],
          doInitialSnapshot,
          replicationSlotName: foreign,
        };
        await expect(refusal(harness, spec)).rejects.toMatchObject({
          kind: 'config',
          message: expect.stringContaining(`replication slot ${foreign} already exists and was not created`),
        });
        const after = await slot(foreign);
        expect(after).toEqual(before);
        // Nothing was recorded as the mirror's, so its drop removes nothing.
        expect((await harness.catalog.getRuntime(spec.name))?.setup).toBeNull();
        await dropMirror(harness, spec);
        expect(await slot(foreign)).toEqual(before);
        expect(await publicationExists(foreign)).toBe(true);
      }
      expect(before?.active_pid).not.toBeNull();
      // Refused before anything was made at the destination either.
      const copied = await harness.destination.client.query(
        `SELECT to_regclass('guarded') IS NULL AS absent`,
      );
      expect(copied.rows[0]).toEqual({ absent: true });
    } finally {
      await reader.close();
    }
  });

  it('refuses a foreign slot and publication under its default names', async () => {
    await sourceTable('defaults', 3);
    const name = `defaults-${randomSuffix()}`;
    const installationId = await harness.catalog.installationId();
    const slotName = defaultSlotName(name, installationId);
    const publicationName = defaultPublicationName(name, installationId);
    await harness.source.client.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [
      slotName,
    ]);
    const before = await slot(slotName);
    const spec: SpecInput = { name, tableMappings: [mapping('defaults')], doInitialSnapshot: true };
    await expect(refusal(harness, spec)).rejects.toMatchObject({
      kind: 'config',
      message: expect.stringContaining(slotName),
    });
    expect(await slot(slotName)).toEqual(before);

    // The slot gone, a foreign publication of the default name is refused too, and kept.
    await harness.source.client.query(`SELECT pg_drop_replication_slot($1)`, [slotName]);
    await harness.source.client.query(`CREATE PUBLICATION ${publicationName} FOR TABLE defaults`);
    await expect(refusal(harness, spec)).rejects.toMatchObject({
      kind: 'config',
      message: expect.stringContaining(`publication ${publicationName} already exists and was not created`),
    });
    await dropMirror(harness, spec);
    expect(await publicationExists(publicationName)).toBe(true);
    expect(await slot(slotName)).toBeUndefined();
  });

  it('adopts a foreign slot when told to, streams from it, and keeps it and a named publication on drop', async () => {
    await sourceTable('adopted', 0);
    const foreign = `adopt_${randomSuffix()}`;
    await harness.source.client.query(`CREATE PUBLICATION ${foreign} FOR TABLE adopted`);
    await harness.source.client.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [foreign]);
    const spec: SpecInput = {
      name: `adopt-${randomSuffix()}`,
      tableMappings: [mapping('adopted')],
      doInitialSnapshot: false,
      replicationSlotName: foreign,
      publicationName: foreign,
      adoptExistingSlot: true,
      idleTimeoutSeconds: 1,
    };
    const mirror = startMirror(harness, spec);
    try {
      await harness.source.client.query(`INSERT INTO adopted VALUES (1, 'one'), (2, 'two')`);
      await expectSameRows(harness, 'adopted');
    } finally {
      await mirror.stop();
    }
    const setup = (await harness.catalog.getRuntime(spec.name))?.setup;
    expect(setup).toMatchObject({ slotName: foreign, slotCreatedByMirror: false });
    await dropMirror(harness, spec);
    expect(await slot(foreign)).toBeDefined();
    expect(await publicationExists(foreign)).toBe(true);
    const logs = await harness.catalog.listLogs({ mirror: spec.name, offset: 0, limit: 100 });
    expect(logs.entries.map((entry) => entry.message).join('\n')).toContain(
      `kept adopted replication slot ${foreign}`,
    );
  });

  it('refuses a slot re-created under its recorded name by someone else', async () => {
    await sourceTable('recreated', 2);
    const spec: SpecInput = {
      name: `recreated-${randomSuffix()}`,
      tableMappings: [mapping('recreated')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const first = startMirror(harness, spec);
    await expectSameRows(harness, 'recreated');
    await first.stop();
    const slotName = (await harness.catalog.getRuntime(spec.name))?.setup?.slotName ?? '';
    expect(slotName).toMatch(/^tributary_recreated_[0-9a-f]{8}_[0-9a-f]{8}$/);
    // Someone drops it and makes another of the name, with another plugin: once
    // the stopped mirror's walsender has gone (it exits after its connection closed).
    await waitFor(
      async () =>
        (
          await harness.source.client.query(
            `SELECT 1 FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NULL`,
            [slotName],
          )
        ).rowCount === 1,
      10_000,
      'the slot released',
    );
    await harness.source.client.query(`SELECT pg_drop_replication_slot($1)`, [slotName]);
    await harness.source.client.query(`SELECT pg_create_logical_replication_slot($1, 'test_decoding')`, [
      slotName,
    ]);
    const before = await slot(slotName);
    await expect(refusal(harness, spec)).rejects.toMatchObject({
      kind: 'config',
      message: expect.stringContaining(
        `replication slot ${slotName} is not the slot mirror ${spec.name} created`,
      ),
    });
    await dropMirror(harness, spec);
    expect(await slot(slotName)).toEqual(before);
  });

  it('does not empty a populated destination table it did not create, unless resyncing', async () => {
    await sourceTable('populated', 5);
    await harness.destination.client.query(`CREATE TABLE populated (id int PRIMARY KEY, v text)`);
    await harness.destination.client.query(`INSERT INTO populated VALUES (100, 'precious')`);
    const spec: SpecInput = {
      name: `populated-${randomSuffix()}`,
      tableMappings: [mapping('populated')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    await expect(refusal(harness, spec)).rejects.toMatchObject({
      kind: 'config',
      message: expect.stringContaining(
        'destination table(s) public.populated already hold rows and were not created by mirror',
      ),
    });
    expect((await harness.destination.client.query(`SELECT id, v FROM populated`)).rows).toEqual([
      { id: 100, v: 'precious' },
    ]);
    await dropMirror(harness, spec);

    // An empty existing table is loaded.
    await harness.destination.client.query(`DELETE FROM populated`);
    const empty = startMirror(harness, { ...spec, name: `empty-${randomSuffix()}` });
    try {
      await expectSameRows(harness, 'populated');
    } finally {
      await empty.stop();
    }
    await dropMirror(harness, { ...spec, name: empty.spec.name });

    // A resync may replace rows it did not write.
    await harness.destination.client.query(`INSERT INTO populated VALUES (100, 'stale')`);
    const resync = startMirror(harness, { ...spec, name: `resync-${randomSuffix()}`, resync: true });
    try {
      await expectSameRows(harness, 'populated');
    } finally {
      await resync.stop();
    }
    await dropMirror(harness, { ...spec, name: resync.spec.name });
  });

  it('gives two installations on one source different default names for the same mirror', async () => {
    await sourceTable('shared', 3);
    const second: { catalogDatabase?: TestDatabase; destination?: TestDatabase; pool?: pg.Pool } = {};
    try {
      second.catalogDatabase = await createTestDatabase('own_cat2');
      second.destination = await createTestDatabase('own_dst2');
      second.pool = droppablePool({ ...second.catalogDatabase.config, max: 2 });
      const catalog = new PostgresCatalog(second.pool);
      await catalog.migrate();
      const other: Harness = {
        ...harness,
        catalog,
        catalogDatabase: second.catalogDatabase,
        destination: second.destination,
      };
      expect(await catalog.installationId()).not.toBe(await harness.catalog.installationId());
      const spec: SpecInput = {
        name: `shared-${randomSuffix()}`,
        tableMappings: [mapping('shared')],
        doInitialSnapshot: true,
        idleTimeoutSeconds: 1,
      };
      const mirrors = [startMirror(harness, spec), startMirror(other, spec)];
      try {
        await harness.source.client.query(`INSERT INTO shared VALUES (4, 'four')`);
        await expectSameRows(harness, 'shared');
        await expectSameRows(other, 'shared');
      } finally {
        for (const mirror of mirrors) await mirror.stop();
      }
      const names = await Promise.all(
        [harness.catalog, catalog].map(async (each) => (await each.getRuntime(spec.name))?.setup?.slotName),
      );
      expect(names[0]).not.toBe(names[1]);
      for (const name of names) expect(await slot(name ?? '')).toBeDefined();
      // Dropping one installation's mirror leaves the other's slot.
      await dropMirror(harness, spec);
      expect(await slot(names[0] ?? '')).toBeUndefined();
      expect(await slot(names[1] ?? '')).toBeDefined();
      await dropMirror(other, spec);
      expect(await slot(names[1] ?? '')).toBeUndefined();
    } finally {
      await second.pool?.end();
      await Promise.all([second.catalogDatabase?.drop(), second.destination?.drop()]);
    }
  });
});

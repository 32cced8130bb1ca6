// What differs between PostgreSQL majors. Runs in every project: on the shared
// server (15) and in the postgres-13, -16 and -18 projects (vitest.config.ts),
// where the source is that major and the destination the newest release.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifySlotState } from '../../engine/src/connectors/classify/index.ts';
import {
  defaultSlotName,
  readSlotFailover,
  readSlotState,
} from '../../engine/src/connectors/postgres/source/slot.ts';
import { validateSource } from '../../engine/src/connectors/postgres/source/validate-source.ts';
import { EngineError } from '../../engine/src/errors.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import {
  createHarness,
  dropMirror,
  expectSameRows,
  type Harness,
  mapping,
  type SpecInput,
  startMirror,
} from '../support/mirror-harness.ts';
import { startPrivatePostgres } from '../support/private-postgres.ts';
import { destinationPostgres, postgres, sourcePostgres, unsupportedPostgres } from '../support/testenv.ts';

async function serverMajor(harness: Harness, side: 'source' | 'destination'): Promise<number> {
  const result = await harness[side].client.query<{ version: number }>(
    `SELECT current_setting('server_version_num')::int / 10000 AS version`,
  );
  return Number(result.rows[0]?.version);
}

describe(`PostgreSQL ${sourcePostgres.major} as source, ${destinationPostgres.major} as destination`, () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness('versions');
  });

  afterAll(async () => {
    await harness?.close();
  });

  const slotFailover = async (slotName: string) =>
    (
      await harness.source.client.query<{ failover: boolean | null }>(
        `SELECT (to_jsonb(s) ->> 'failover')::boolean AS failover FROM pg_replication_slots s WHERE slot_name = $1`,
        [slotName],
      )
    ).rows[0]?.failover;

  it('runs on the servers the project names', async () => {
    expect(await serverMajor(harness, 'source')).toBe(sourcePostgres.major);
    expect(await serverMajor(harness, 'destination')).toBe(destinationPostgres.major);
  });

  it.runIf(sourcePostgres === postgres)('refuses a PostgreSQL 12 source, naming the version', async () => {
    const server = await startPrivatePostgres({ server: unsupportedPostgres });
    try {
      const client = await server.connect();
      try {
        const refusal = await validateSource(client, { tables: [] }).then(
          () => undefined,
          (error: unknown) => error,
        );
        expect(refusal).toBeInstanceOf(EngineError);
        expect((refusal as EngineError).kind).toBe('source_setup');
        expect((refusal as EngineError).message).toMatch(
          /PostgreSQL 12\.\d+ is too old: version 13 or later is required/,
        );
      } finally {
        await client.end();
      }
    } finally {
      await server.destroy();
    }
  });

  it("reads a slot's state from the columns this major has", async () => {
    const slotName = `state_${randomSuffix()}`;
    await harness.source.client.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [
      slotName,
    ]);
    try {
      const state = await readSlotState(harness.source.client, slotName);
      // `conflicting` arrived in 16, `invalidation_reason` and `failover` in 17.
      expect(state).toEqual({
        walStatus: 'reserved',
        invalidationReason: null,
        conflicting: sourcePostgres.major >= 16 ? false : null,
      });
      expect(classifySlotState(slotName, state)).toBeUndefined();
      expect(await readSlotFailover(harness.source.client, slotName)).toBe(
        sourcePostgres.major >= 17 ? false : null,
      );
    } finally {
      await harness.source.client.query(`SELECT pg_drop_replication_slot($1)`, [slotName]);
    }
  });

  it.runIf(sourcePostgres.major >= 17)(
    'creates a failover slot when asked, and turns failover off and on for its own slot',
    async () => {
      await harness.source.client.query(`CREATE TABLE failover_rows (id int PRIMARY KEY, v text)`);
      await harness.source.client.query(`INSERT INTO failover_rows VALUES (1, 'one')`);
      const spec: SpecInput = {
        name: `failover-${randomSuffix()}`,
        tableMappings: [mapping('failover_rows')],
        doInitialSnapshot: true,
        idleTimeoutSeconds: 1,
        failoverSlot: true,
      };
      const slotName = defaultSlotName(spec.name, await harness.catalog.installationId());
      const running = async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'running';
      let mirror = startMirror(harness, spec);
      await waitFor(running, 30_000, 'running');
      expect(await slotFailover(slotName)).toBe(true);
      await harness.source.client.query(`INSERT INTO failover_rows VALUES (2, 'two')`);
      await expectSameRows(harness, 'failover_rows');
      expect(await mirror.stop()).toBe('stopped');

      // An edit of the option applies to the existing slot at the next start,
      // which says so in the mirror's log.
      const logged = (message: string) => async () =>
        (await harness.catalog.listLogs({ mirror: spec.name, offset: 0, limit: 100 })).entries.some(
          (entry) => entry.message === message,
        );
      mirror = startMirror(harness, { ...spec, failoverSlot: false });
      await waitFor(
        logged(`replication slot ${slotName} is no longer a failover slot`),
        30_000,
        'failover off',
      );
      expect(await slotFailover(slotName)).toBe(false);
      expect(await mirror.stop()).toBe('stopped');
      mirror = startMirror(harness, spec);
      await waitFor(logged(`replication slot ${slotName} is now a failover slot`), 30_000, 'failover on');
      expect(await slotFailover(slotName)).toBe(true);
      await harness.source.client.query(`INSERT INTO failover_rows VALUES (3, 'three')`);
      await expectSameRows(harness, 'failover_rows');
      expect(await mirror.stop()).toBe('stopped');
      await dropMirror(harness, spec);
    },
  );

  it.runIf(sourcePostgres.major < 17)(
    'refuses a failover slot before PostgreSQL 17, creating nothing',
    async () => {
      await harness.source.client.query(`CREATE TABLE no_failover (id int PRIMARY KEY)`);
      const spec: SpecInput = {
        name: `nofailover-${randomSuffix()}`,
        tableMappings: [mapping('no_failover')],
        doInitialSnapshot: true,
        failoverSlot: true,
      };
      const mirror = startMirror(harness, spec, { supervisedBackoffMs: 100 });
      await expect(mirror.done).rejects.toThrow('mirror failed');
      const runtime = await harness.catalog.getRuntime(spec.name);
      expect(runtime?.phase).toBe('failed');
      expect(runtime?.errorMessage).toContain('failover slots need PostgreSQL 17 or later');
      const slotName = defaultSlotName(spec.name, await harness.catalog.installationId());
      const slots = await harness.source.client.query(
        `SELECT 1 FROM pg_replication_slots WHERE slot_name = $1`,
        [slotName],
      );
      expect(slots.rowCount).toBe(0);
    },
  );
});

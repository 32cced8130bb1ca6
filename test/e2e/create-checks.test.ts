// A mirror that can only fail later is refused at create with 400, naming the
// table (or publication, or slot) and the fix; nothing is created. A keyless
// table with REPLICA IDENTITY FULL is accepted for a Kafka destination (change
// events carry the whole old row) and refused for destinations that write rows by key.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultPublicationName, defaultSlotName } from '../../engine/src/connectors/postgres/source/slot.ts';
import { EngineError } from '../../engine/src/errors.ts';
import { peerSchema } from '../../engine/src/resources/peer.ts';
import { createTestDatabase, randomSuffix, type TestDatabase } from '../support/databases.ts';
import { createFacade, type Facade } from '../support/facade.ts';
import { createHarness, type Harness, mapping, startMirror } from '../support/mirror-harness.ts';
import { destinationPostgres, sourcePostgres } from '../support/testenv.ts';

describe('refused at create', () => {
  let facade: Facade;
  let source: TestDatabase;
  let destination: TestDatabase;
  const suffix = randomSuffix();
  const sourcePeer = `src-${suffix}`;
  const destinationPeer = `dst-${suffix}`;
  const streamPeer = `kafka-${suffix}`;
  const slotTaken = `taken_${suffix}`;

  const create = (name: string, tables: string[], overrides: Record<string, unknown> = {}) =>
    facade.post('/api/v1/flows/cdc/create', {
      connection_configs: {
        flow_job_name: name,
        source_name: sourcePeer,
        destination_name: destinationPeer,
        table_mappings: tables.map((table) => ({
          source_table_identifier: table,
          destination_table_identifier: table,
        })),
        do_initial_snapshot: true,
        ...overrides,
      },
    });

  beforeAll(async () => {
    [source, destination] = await Promise.all([
      createTestDatabase('create_checks_src', sourcePostgres),
      createTestDatabase('create_checks_dst', destinationPostgres),
    ]);
    await source.client.query(`
      CREATE TABLE keyed (id int PRIMARY KEY, body text);
      CREATE TABLE filtered (id int PRIMARY KEY, region text);
      CREATE TABLE keyless (body text);
      CREATE TABLE keyless_full (body text);
      ALTER TABLE keyless_full REPLICA IDENTITY FULL;
      CREATE PUBLICATION ${pg.escapeIdentifier(`pub_${suffix}`)} FOR TABLE keyed;
      CREATE TABLE events (id bigint, k int, body text, PRIMARY KEY (id, k)) PARTITION BY RANGE (k);
      CREATE TABLE events_low PARTITION OF events FOR VALUES FROM (0) TO (100);
      CREATE TABLE events_rest PARTITION OF events DEFAULT;
      CREATE PUBLICATION ${pg.escapeIdentifier(`leafpub_${suffix}`)} FOR TABLE events;
      CREATE PUBLICATION ${pg.escapeIdentifier(`rootpub_${suffix}`)} FOR TABLE events WITH (publish_via_partition_root = true)`);
    await source.client.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [slotTaken]);
    facade = await createFacade();
    for (const [name, database] of [
      [sourcePeer, source],
      [destinationPeer, destination],
    ] as const) {
      const response = await facade.post('/api/v1/peers/create', {
        peer: { name, type: 3, relational_config: { ...database.config } },
      });
      expect(response.json()).toMatchObject({ status: 'CREATED' });
    }
    await facade.controlPlane.store.putPeer(
      peerSchema.parse({
        name: streamPeer,
        kind: 'stream',
        config: { servers: ['127.0.0.1:9'], username: 'u', password: 'p', sasl: 'PLAIN' },
      }),
      null,
    );
  }, 60_000);

  afterAll(async () => {
    await facade?.close();
    await source?.client.query(`SELECT pg_drop_replication_slot($1)`, [slotTaken]).catch(() => {});
    await Promise.all([source?.drop(), destination?.drop()]);
  });

  async function expectRefused(response: Awaited<ReturnType<Facade['post']>>, ...parts: string[]) {
    expect(response.statusCode, response.body).toBe(400);
    const { message } = response.json() as { message: string };
    for (const part of parts) expect(message).toContain(part);
  }

  it('refuses a table without a key or replica identity, naming it and the fix', async () => {
    const name = `nokey-${suffix}`;
    await expectRefused(
      await create(name, ['public.keyed', 'public.keyless']),
      'source table public.keyless has no primary key',
      'add a primary key to public.keyless',
    );
    expect(await facade.controlPlane.store.getMirror(name)).toBeUndefined();
  });

  it('refuses a keyless REPLICA IDENTITY FULL table for a PostgreSQL destination', async () => {
    await expectRefused(
      await create(`full-${suffix}`, ['public.keyless_full']),
      'source table public.keyless_full has no primary key; REPLICA IDENTITY FULL is not enough for this destination',
    );
  });

  it('accepts a keyless REPLICA IDENTITY FULL table for a Kafka destination', async () => {
    const response = await create(`full-kafka-${suffix}`, ['public.keyless_full'], {
      destination_name: streamPeer,
    });
    expect(response.statusCode, response.body).toBe(200);
  });

  it('refuses a named publication that lacks a mapped table', async () => {
    await expectRefused(
      await create(`pub-${suffix}`, ['public.keyed', 'public.keyless_full'], {
        publication_name: `pub_${suffix}`,
        destination_name: streamPeer,
      }),
      `publication pub_${suffix} does not contain public.keyless_full`,
    );
  });

  it('refuses a replication slot name already in use', async () => {
    await expectRefused(
      await create(`slot-${suffix}`, ['public.keyed'], { replication_slot_name: slotTaken }),
      `replication slot ${slotTaken} already exists`,
    );
  });

  it('accepts a replication slot in use when the request adopts it', async () => {
    const response = await create(`adopt-${suffix}`, ['public.keyed'], {
      replication_slot_name: slotTaken,
      adopt_existing_slot: true,
      do_initial_snapshot: false,
    });
    expect(response.statusCode, response.body).toBe(200);
    expect((await facade.controlPlane.store.getMirror(`adopt-${suffix}`))?.spec.adoptExistingSlot).toBe(true);
  });

  const failoverSlots = sourcePostgres.major >= 17;
  it(`${failoverSlots ? 'accepts' : 'refuses'} failover_slot on PostgreSQL ${sourcePostgres.major}`, async () => {
    const name = `failover-${suffix}`;
    const response = await create(name, ['public.keyed'], { failover_slot: true });
    if (failoverSlots) {
      expect(response.statusCode, response.body).toBe(200);
      expect((await facade.controlPlane.store.getMirror(name))?.spec.failoverSlot).toBe(true);
    } else {
      await expectRefused(response, 'failover slots need PostgreSQL 17 or later', 'failover_slot');
      expect(await facade.controlPlane.store.getMirror(name)).toBeUndefined();
    }
  });

  it('refuses a publication of the default name that the mirror would not own', async () => {
    const name = `defpub-${suffix}`;
    const publication = defaultPublicationName(name, await facade.controlPlane.catalog.installationId());
    await source.client.query(`CREATE PUBLICATION ${pg.escapeIdentifier(publication)} FOR TABLE keyed`);
    await expectRefused(
      await create(name, ['public.keyed']),
      `publication ${publication} already exists and a new mirror would not own it`,
    );
    expect(await facade.controlPlane.store.getMirror(name)).toBeUndefined();
  });

  it('refuses a partition mapped beside the partitioned table it belongs to', async () => {
    const name = `overlap-${suffix}`;
    await expectRefused(
      await create(name, ['public.events', 'public.events_low']),
      'source table public.events_low is a partition of public.events, which the mirror maps too',
      'map one of the two',
    );
    expect(await facade.controlPlane.store.getMirror(name)).toBeUndefined();
  });

  it('refuses a named publication that publishes a partitioned table’s changes under its partitions’ names', async () => {
    const name = `leafpub-${suffix}`;
    await expectRefused(
      await create(name, ['public.events'], { publication_name: `leafpub_${suffix}` }),
      `publication leafpub_${suffix} publishes the changes of public.events's partitions under their own names`,
      `ALTER PUBLICATION "leafpub_${suffix}" SET (publish_via_partition_root = true)`,
    );
    expect(await facade.controlPlane.store.getMirror(name)).toBeUndefined();
  });

  it('refuses a partition mapped alone from a publication that publishes it under its parent’s name', async () => {
    const name = `rootpub-${suffix}`;
    await expectRefused(
      await create(name, ['public.events_low'], { publication_name: `rootpub_${suffix}` }),
      `publication rootpub_${suffix} publishes the changes of public.events_low under its parent public.events's name`,
    );
    expect(await facade.controlPlane.store.getMirror(name)).toBeUndefined();
  });

  it('accepts a partitioned table from a named publication that publishes via the root, and a partition alone', async () => {
    const viaRoot = await create(`rootok-${suffix}`, ['public.events'], {
      publication_name: `rootpub_${suffix}`,
    });
    expect(viaRoot.statusCode, viaRoot.body).toBe(200);
    const leaf = await create(`leafok-${suffix}`, ['public.events_low']);
    expect(leaf.statusCode, leaf.body).toBe(200);
  });

  /** A mirror of public.filtered with a row filter, in one spelling or the other. */
  const createFiltered = (name: string, filter: string, spelling: 'snake' | 'camel' = 'snake') =>
    create(name, [], {
      table_mappings: [
        spelling === 'snake'
          ? {
              source_table_identifier: 'public.filtered',
              destination_table_identifier: 'public.filtered',
              row_filter: filter,
            }
          : {
              sourceTableIdentifier: 'public.filtered',
              destinationTableIdentifier: 'public.filtered',
              rowFilter: filter,
            },
      ],
    });

  /** Nothing of the mirror exists: no mirror, no slot, no publication (not even the check's). */
  async function expectNothingCreated(name: string) {
    expect(await facade.controlPlane.store.getMirror(name)).toBeUndefined();
    const installationId = await facade.controlPlane.catalog.installationId();
    const leftovers = await source.client.query(
      `SELECT slot_name AS name FROM pg_replication_slots WHERE slot_name = $1
       UNION ALL SELECT pubname FROM pg_publication WHERE pubname IN ($2, 'tributary_row_filter_check')`,
      [defaultSlotName(name, installationId), defaultPublicationName(name, installationId)],
    );
    expect(leftovers.rows).toEqual([]);
  }

  it('refuses a row filter reading a column outside the replica identity, with PostgreSQL’s reason', async () => {
    const name = `filter-identity-${suffix}`;
    await expectRefused(
      await createFiltered(name, `region = 'eu'`),
      'row filter of public.filtered',
      'Column used in the publication WHERE expression is not part of the replica identity.',
    );
    await expectNothingCreated(name);
  });

  it('refuses row filters PostgreSQL refuses, with its reasons', async () => {
    // PostgreSQL 15+ says it of a publication's filter, 13 and 14 of the index expression it is checked as.
    const cases = [
      ['nope > 1', /column "nope" does not exist/],
      [`id > 'x'`, /invalid input syntax for type integer/],
      ['id > extract(epoch FROM now())', /mutable/i],
      ['id IN (SELECT id FROM keyed)', /subquer|only columns, constants, built-in operators/i],
    ] as const;
    for (const [index, [filter, reason]] of cases.entries()) {
      const name = `filter-bad-${index}-${suffix}`;
      const response = await createFiltered(name, filter);
      expect(response.statusCode, response.body).toBe(400);
      const { message } = response.json() as { message: string };
      expect(message).toContain('row filter of public.filtered');
      expect(message).toMatch(reason);
      await expectNothingCreated(name);
    }
  });

  it('refuses a row filter that is not one expression, naming the field as spelled', async () => {
    for (const [filter, spelling, field] of [
      ['id > 0); DROP TABLE keyed; --', 'snake', 'connection_configs.table_mappings[0].row_filter'],
      ['id > 0) OR (true', 'camel', 'connection_configs.table_mappings[0].rowFilter'],
      ['id > 0 /* comment */', 'snake', 'row_filter'],
      ["id > 0 OR 'a\\' = 'b'", 'snake', 'row_filter'],
    ] as const) {
      const name = `filter-shape-${suffix}`;
      await expectRefused(await createFiltered(name, filter, spelling), field, 'is one SQL expression');
      await expectNothingCreated(name);
    }
    expect((await source.client.query(`SELECT to_regclass('public.keyed') AS t`)).rows[0]?.t).toBe('keyed');
  });

  it('accepts a row filter over the replica identity in either spelling', async () => {
    for (const spelling of ['snake', 'camel'] as const) {
      const name = `filter-ok-${spelling}-${suffix}`;
      const response = await createFiltered(name, 'id % 2 = 0', spelling);
      expect(response.statusCode, response.body).toBe(200);
      const mirror = await facade.controlPlane.store.getMirror(name);
      expect(mirror?.spec.tableMappings[0]?.rowFilter).toBe('id % 2 = 0');
    }
  });

  it('accepts a mirror the source can serve', async () => {
    const response = await create(`good-${suffix}`, ['public.keyed']);
    expect(response.statusCode, response.body).toBe(200);
  });
});

describe('refused when it starts', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness('keyless_run');
  });

  afterAll(async () => {
    await harness?.close();
  });

  it('fails a keyless REPLICA IDENTITY FULL table before loading it into PostgreSQL', async () => {
    await harness.source.client.query(`CREATE TABLE later_keyless (body text)`);
    await harness.source.client.query(`ALTER TABLE later_keyless REPLICA IDENTITY FULL`);
    await harness.source.client.query(`INSERT INTO later_keyless VALUES ('a')`);
    const mirror = startMirror(harness, {
      name: `later-${randomSuffix()}`,
      tableMappings: [mapping('later_keyless')],
      doInitialSnapshot: true,
    });
    let failure: unknown;
    try {
      failure = await mirror.done.then(
        () => undefined,
        (error: unknown) => error,
      );
    } finally {
      await mirror.stop().catch(() => {});
    }
    expect(failure).toBeInstanceOf(EngineError);
    expect((failure as EngineError).kind).toBe('replica_identity');
    expect((failure as EngineError).message).toContain('public.later_keyless');
    const created = await harness.destination.client.query(`SELECT to_regclass('public.later_keyless') AS t`);
    expect(created.rows[0]?.t).toBeNull();
  });
});

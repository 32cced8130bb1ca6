// Every error of a phase reaches the mirror's error path within seconds, on
// every destination: the first write of a snapshot partition, of a CDC batch
// and of the setup made to fail (the fault-injecting wrapper, which throws
// before it reads anything), and one real refusal per destination. Before the
// snapshot reader dropped its connection, a partition whose write gave up
// without reading its COPY stream left the reader's ROLLBACK queued behind that
// COPY for ever, and the load waited without a word.

import { type AddressInfo, createServer, type Socket } from 'node:net';
import { ClickHouseLogLevel, createClient } from '@clickhouse/client';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MirrorRuntime } from '../../engine/src/catalog/catalog.ts';
import { ClickHouseDestination } from '../../engine/src/connectors/clickhouse/destination.ts';
import type { Destination } from '../../engine/src/connectors/destination.ts';
import { KafkaDestination } from '../../engine/src/connectors/kafka/destination.ts';
import { MemoryDestination } from '../../engine/src/connectors/memory/destination.ts';
import {
  type FaultedCall,
  FaultInjectingDestination,
} from '../../engine/src/connectors/memory/fault-injecting.ts';
import { SnowflakeDestination } from '../../engine/src/connectors/snowflake/destination.ts';
import { EngineMetrics } from '../../engine/src/observability/engine-metrics.ts';
import { deleteTopics, kafkaClient, streamConfig } from '../integration/kafka-support.ts';
import { clickhouseEngines } from '../support/clickhouse-engines.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import {
  createHarness,
  dropMirror,
  type Harness,
  type RunningMirror,
  type SpecInput,
  startMirror,
} from '../support/mirror-harness.ts';
import { mountReadOnlyDisk } from '../support/small-disk.ts';
import { emulatorConfig, uniqueName } from '../support/snowflake-peer.ts';

const logger = pino({ level: process.env.TRIBUTARY_TEST_LOG ?? 'silent' });

/** How soon an error must show: a bounded poll, not a measurement. */
const surfacesWithinMs = 10_000;

const clickhouseServer = clickhouseEngines[0];
if (!clickhouseServer) throw new Error('no ClickHouse engine in the test environment');

interface DestinationKind {
  readonly name: string;
  /** The destination a mirror of this suite writes to. */
  create(spec: SpecInput): Destination;
  /** Where the mirror's tables go at the destination (a schema, a database or a topic prefix). */
  readonly tableSchema: string;
}

describe('errors of every phase reach the mirror', () => {
  let harness: Harness;
  const suffix = randomSuffix();
  const clickhouseDatabase = `tributary_errors_${suffix}`;
  const snowflakeDatabase = uniqueName('ERRORS');
  const topics: string[] = [];
  const clickhouseAdmin = createClient({
    url: `http://127.0.0.1:${clickhouseServer.config('default').httpPort}`,
    username: clickhouseServer.config('default').user,
    password: clickhouseServer.config('default').password,
    log: { level: ClickHouseLogLevel.OFF },
  });

  const kinds: readonly DestinationKind[] = [
    {
      name: 'PostgreSQL',
      tableSchema: 'public',
      create: () => harnessDestination(),
    },
    {
      name: 'ClickHouse',
      tableSchema: clickhouseDatabase,
      create: (spec) =>
        new ClickHouseDestination(clickhouseServer.config(clickhouseDatabase), {
          mirror: spec.name,
          mirrorColumns: {},
          tableMappings: [],
          maxBatchSize: spec.maxBatchSize ?? 1_000_000,
          logger,
        }),
    },
    {
      name: 'Kafka',
      tableSchema: `errors_${suffix}`,
      create: (spec) => new KafkaDestination(streamConfig('PLAINTEXT', ''), { mirror: spec.name, logger }),
    },
    {
      name: 'Snowflake',
      tableSchema: `errors_${suffix}`,
      create: (spec) =>
        new SnowflakeDestination(emulatorConfig(snowflakeDatabase), {
          mirror: spec.name,
          mirrorColumns: {},
          logger,
        }),
    },
  ];

  // The harness's own PostgreSQL destination: startMirror hands it to wrapDestination.
  let harnessDestination: () => Destination = () => {
    throw new Error('no PostgreSQL destination yet');
  };

  beforeAll(async () => {
    harness = await createHarness('errors');
    await clickhouseAdmin.command({ query: `CREATE DATABASE ${clickhouseDatabase}` });
  }, 60_000);

  afterAll(async () => {
    await clickhouseAdmin.command({ query: `DROP DATABASE IF EXISTS ${clickhouseDatabase}` }).catch(() => {});
    await clickhouseAdmin.close();
    if (topics.length > 0) {
      const client = kafkaClient('PLAINTEXT');
      await deleteTopics(client, topics).catch(() => {});
    }
    await harness?.close();
  });

  const runtime = (name: string): Promise<MirrorRuntime | undefined> => harness.catalog.getRuntime(name);

  /**
   * Waits for the retried fault to show in the mirror's logs (the supervisor
   * writes the WARN line and the catalog's retrying error together; the status
   * and the Degraded condition read the latter, which may already be cleared
   * again by a quick recovery).
   */
  async function faultShown(name: string, includes: string): Promise<string> {
    let shown: string | undefined;
    await waitFor(
      async () => {
        const { entries } = await harness.catalog.listLogs({
          mirror: name,
          levels: ['WARN', 'ERROR'],
          offset: 0,
          limit: 100,
        });
        shown = entries.map((entry) => entry.message).find((message) => message.includes(includes));
        return shown !== undefined;
      },
      surfacesWithinMs,
      `the fault "${includes}" of ${name} to show`,
    );
    return shown ?? '';
  }

  /** A table of its own with `rows` rows, mapped to the destination's schema. */
  async function sourceTable(kind: DestinationKind, prefix: string, rows: number) {
    const table = `${prefix}_${randomSuffix()}`;
    await harness.source.client.query(`CREATE TABLE ${table} (id int PRIMARY KEY, v text)`);
    await harness.source.client.query(
      `INSERT INTO ${table} SELECT g, 'v' || g FROM generate_series(1, ${rows}) g`,
    );
    if (kind.name === 'Kafka') topics.push(`${kind.tableSchema}.${table}`);
    return {
      table,
      mapping: {
        source: { schema: 'public', table },
        destination: { schema: kind.tableSchema, table },
        exclude: [],
      },
    };
  }

  function start(
    kind: DestinationKind,
    spec: SpecInput,
    wrap: (destination: Destination) => Destination = (destination) => destination,
  ): RunningMirror {
    return startMirror(harness, spec, {
      supervisedBackoffMs: 200,
      wrapDestination: (base) => {
        harnessDestination = () => base;
        return wrap(kind.create(spec));
      },
    });
  }

  async function stopAndDrop(mirror: RunningMirror, spec: SpecInput) {
    await mirror.stop().catch(() => {});
    await dropMirror(harness, spec).catch(() => {});
  }

  const phases: readonly { call: FaultedCall; snapshot: boolean }[] = [
    { call: 'setupTables', snapshot: true },
    { call: 'writeSnapshotPartition', snapshot: true },
    { call: 'syncBatch', snapshot: false },
  ];

  for (const kind of kinds) {
    describe(`${kind.name} destination`, () => {
      for (const { call, snapshot } of phases) {
        it(`shows a failed first ${call} within seconds and then goes on`, async () => {
          const { table, mapping: tableMapping } = await sourceTable(kind, call.toLowerCase(), 100);
          const spec: SpecInput = {
            name: `err-${call.toLowerCase()}-${randomSuffix()}`,
            tableMappings: [tableMapping],
            doInitialSnapshot: snapshot,
            idleTimeoutSeconds: 1,
          };
          let faulty: FaultInjectingDestination | undefined;
          const mirror = start(kind, spec, (destination) => {
            faulty = new FaultInjectingDestination(destination);
            faulty.failNext(call, 1);
            return faulty;
          });
          try {
            if (call === 'syncBatch') {
              await waitFor(async () => (await runtime(spec.name))?.phase === 'running', 60_000, 'running');
              await harness.source.client.query(`INSERT INTO ${table} VALUES (1000, 'new')`);
            }
            expect(await faultShown(spec.name, `injected failure of ${call}`)).toMatch(/^destination: /);
            // Retried by its policy: the phase it failed in completes.
            if (call === 'syncBatch') {
              await waitFor(
                async () =>
                  (
                    await harness.catalog.listBatches(spec.name, {
                      limit: 1,
                      ascending: false,
                      finishedOnly: true,
                    })
                  ).batches.length > 0,
                30_000,
                'a durable batch after the retry',
              );
            } else {
              await waitFor(async () => (await runtime(spec.name))?.phase === 'running', 60_000, 'running');
            }
            await waitFor(
              async () => (await runtime(spec.name))?.retryingError === null,
              10_000,
              'the fault to clear',
            );
          } finally {
            await stopAndDrop(mirror, spec);
          }
        });
      }
    });
  }

  /** Starts a one-table mirror with an initial load, and stops and drops it after `body`. */
  async function withLoad(
    kind: DestinationKind,
    prefix: string,
    body: (context: { table: string; spec: SpecInput; mirror: RunningMirror }) => Promise<void>,
    prepare: (table: string) => Promise<void> = async () => {},
  ): Promise<void> {
    const { table, mapping: tableMapping } = await sourceTable(kind, prefix, 100);
    await prepare(table);
    const spec: SpecInput = {
      name: `${prefix}-${randomSuffix()}`,
      tableMappings: [tableMapping],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const mirror = start(kind, spec);
    try {
      await body({ table, spec, mirror });
    } finally {
      await stopAndDrop(mirror, spec);
    }
  }

  describe('a real refusal per destination', () => {
    const [postgresKind, clickhouseKind, kafkaKind, snowflakeKind] = kinds as [
      DestinationKind,
      DestinationKind,
      DestinationKind,
      DestinationKind,
    ];

    it('Snowflake: batch files under a read-only TMPDIR (EROFS) show as engine_resource, and the load goes on once it is writable', async () => {
      const disk = await mountReadOnlyDisk();
      const previous = process.env.TMPDIR;
      process.env.TMPDIR = disk.path;
      try {
        await withLoad(snowflakeKind, 'readonly', async ({ spec }) => {
          const shown = await faultShown(spec.name, 'EROFS');
          expect(shown).toMatch(
            /^destination: create the batch file directory in .* failed \(EROFS\): the file system is read-only/,
          );
          expect(shown).toMatch(/writable temporary directory/);
          await disk.makeWritable();
          await waitFor(async () => (await runtime(spec.name))?.phase === 'running', 60_000, 'running');
        });
      } finally {
        if (previous === undefined) delete process.env.TMPDIR;
        else process.env.TMPDIR = previous;
        await disk.remove();
      }
    });

    it('PostgreSQL: a COPY the destination table refuses (a CHECK constraint) shows within seconds', async () => {
      await withLoad(
        postgresKind,
        'refused',
        async ({ spec }) => {
          expect(await faultShown(spec.name, 'destination: ')).toMatch(/\(23514\)/);
        },
        async (table) => {
          await harness.destination.client.query(
            `CREATE TABLE ${table} (id int PRIMARY KEY, v text CHECK (v NOT LIKE 'v%'))`,
          );
        },
      );
    });

    it('ClickHouse: an insert the server refuses (a materialized view that throws) shows within seconds', async () => {
      await withLoad(
        clickhouseKind,
        'refused',
        async ({ spec }) => {
          expect(await faultShown(spec.name, 'destination: ')).toMatch(/\(code 395\)/);
        },
        async (table) => {
          await clickhouseAdmin.command({
            query: `CREATE TABLE ${clickhouseDatabase}.${table} (id Int32, v Nullable(String),
              _tributary_version UInt64, _tributary_is_deleted UInt8)
              ENGINE = ReplacingMergeTree(_tributary_version) ORDER BY id`,
          });
          // The server runs the view's SELECT on every insert into the table, and it throws.
          await clickhouseAdmin.command({
            query: `CREATE MATERIALIZED VIEW ${clickhouseDatabase}.${table}_refuses ENGINE = Memory
              AS SELECT throwIf(id > 0) AS refused FROM ${clickhouseDatabase}.${table}`,
          });
        },
      );
    });

    it('Kafka: messages larger than the topic takes (max.message.bytes) show within seconds', async () => {
      await withLoad(
        kafkaKind,
        'refused',
        async ({ spec }) => {
          expect(await faultShown(spec.name, 'destination: ')).toMatch(/\(MESSAGE_TOO_LARGE\)/);
        },
        async (table) => {
          const admin = kafkaClient('PLAINTEXT').admin();
          await admin.connect();
          try {
            await admin.createTopics({
              topics: [
                {
                  topic: `${kafkaKind.tableSchema}.${table}`,
                  numPartitions: 1,
                  replicationFactor: 1,
                  configEntries: [{ name: 'max.message.bytes', value: '64' }],
                },
              ],
              waitForLeaders: true,
            });
          } finally {
            await admin.disconnect();
          }
        },
      );
    });
  });

  describe('a step that never answers shows as stalled', () => {
    const stallAfterMs = 1_000;

    async function stallShown(name: string, step: string): Promise<MirrorRuntime['stall']> {
      let stall: MirrorRuntime['stall'] = null;
      await waitFor(
        async () => {
          stall = (await runtime(name))?.stall ?? null;
          return stall?.step.includes(step) === true;
        },
        surfacesWithinMs,
        `${name} to show as stalled on ${step}`,
      );
      return stall;
    }

    const stalledGauge = async (metrics: EngineMetrics, name: string) =>
      (await metrics.registry.getSingleMetric('tributary_engine_stalled')?.get())?.values.find(
        (value) => value.labels.mirror === name,
      )?.value;

    for (const { call, snapshot, step } of [
      { call: 'writeSnapshotPartition', snapshot: true, step: 'initial load: destination: write public.' },
      { call: 'syncBatch', snapshot: false, step: 'CDC: destination: sync batch 1' },
    ] as const) {
      it(`a ${call} that never answers: status, log line and metric, cleared once it answers`, async () => {
        const { table, mapping: tableMapping } = await sourceTable(kinds[0] as DestinationKind, 'silent', 10);
        const spec: SpecInput = {
          name: `silent-${call.toLowerCase()}-${randomSuffix()}`,
          tableMappings: [tableMapping],
          doInitialSnapshot: snapshot,
          idleTimeoutSeconds: 1,
        };
        const metrics = new EngineMetrics();
        const silent = new FaultInjectingDestination(new MemoryDestination());
        silent.holdNext(call, 1);
        const mirror = startMirror(harness, spec, {
          supervisedBackoffMs: 200,
          stallAfterMs,
          metrics,
          wrapDestination: () => silent,
        });
        try {
          if (!snapshot) {
            await waitFor(async () => (await runtime(spec.name))?.phase === 'running', 30_000, 'running');
            await harness.source.client.query(`INSERT INTO ${table} VALUES (1000, 'new')`);
          }
          const stall = await stallShown(spec.name, step);
          expect(stall?.since.getTime()).toBeLessThanOrEqual(Date.now());
          expect(await faultShown(spec.name, `stalled: no progress for 1s while waiting on ${step}`)).toMatch(
            /\(since \d{4}-\d\d-\d\dT/,
          );
          expect(await stalledGauge(metrics, spec.name)).toBe(1);
          silent.releaseHeld();
          await waitFor(
            async () => (await runtime(spec.name))?.stall === null,
            surfacesWithinMs,
            'the stall to clear',
          );
          expect(await stalledGauge(metrics, spec.name)).toBe(0);
        } finally {
          silent.releaseHeld();
          await stopAndDrop(mirror, spec);
        }
      });
    }

    it('a PostgreSQL peer address where a server accepts and never answers (a real socket)', async () => {
      const accepted: Socket[] = [];
      const silentServer = createServer((socket) => {
        accepted.push(socket);
        socket.on('error', () => {});
      });
      await new Promise<void>((resolve) => silentServer.listen(0, '127.0.0.1', resolve));
      const { port } = silentServer.address() as AddressInfo;
      const { mapping: tableMapping } = await sourceTable(kinds[0] as DestinationKind, 'nowhere', 10);
      const spec: SpecInput = {
        name: `nowhere-${randomSuffix()}`,
        tableMappings: [tableMapping],
        doInitialSnapshot: true,
        idleTimeoutSeconds: 1,
      };
      const mirror = startMirror(harness, spec, {
        supervisedBackoffMs: 200,
        stallAfterMs,
        destination: { ...harness.destination.config, host: '127.0.0.1', port },
      });
      try {
        await stallShown(spec.name, 'setup: destination: create tables');
        expect(accepted.length).toBeGreaterThan(0);
      } finally {
        await mirror.stop().catch(() => {});
        for (const socket of accepted) socket.destroy();
        await new Promise<void>((resolve) => silentServer.close(() => resolve()));
      }
    });
  });
});

// Every real destination keeps a batch's position inside an open transaction
// with its checkpoint, reads it back, and forgets it once a batch ends at a
// commit (docs/engine.md, "Transactions larger than a batch"). A PostgreSQL
// checkpoint table from before the position columns gets them at setup.
import { randomBytes } from 'node:crypto';
import { type ClickHouseClient, ClickHouseLogLevel, createClient } from '@clickhouse/client';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClickHouseDestination } from '../../engine/src/connectors/clickhouse/destination.ts';
import type { Destination } from '../../engine/src/connectors/destination.ts';
import { KafkaDestination } from '../../engine/src/connectors/kafka/destination.ts';
import { PostgresDestination } from '../../engine/src/connectors/postgres/destination/destination.ts';
import type {
  ChangeBatch,
  ChangeBuffer,
  DestinationTable,
  TransactionPosition,
} from '../../engine/src/connectors/records.ts';
import { rowOfCells } from '../../engine/src/connectors/rows.ts';
import { SnowflakeDestination } from '../../engine/src/connectors/snowflake/destination.ts';
import { heldBatch } from '../support/batches.ts';
import { clickhouseEngines } from '../support/clickhouse-engines.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { idTextTable } from '../support/id-text-table.ts';
import { emulatorConfig, uniqueName } from '../support/snowflake-peer.ts';
import { deleteTopics, kafkaClient, randomTopic, streamConfig } from './kafka-support.ts';

const logger = pino({ level: process.env.TRIBUTARY_TEST_LOG ?? 'silent' });

// LSNs above 2^53: the position must survive every store exactly.
const commitLsn = 0x0012_3456_89ab_cdefn;
const position = (changeLsn: bigint, changeRank: number): TransactionPosition => ({
  commitLsn,
  changeLsn,
  changeRank,
});

function batch<Held extends ChangeBuffer>(
  destination: Destination<Held>,
  mirror: string,
  table: DestinationTable,
  batchId: bigint,
  ids: number[],
  endLsn: bigint,
  transactionPosition?: TransactionPosition,
): ChangeBatch<Held> {
  const transaction = { xid: 9, commitLsn, commitTimeMicros: 0n };
  const changes = ids.map((id) => ({
    kind: 'insert' as const,
    transaction,
    newRow: rowOfCells([String(id), `v${id}`]),
  }));
  return heldBatch(
    destination,
    { mirror, batchId, endLsn, ...(transactionPosition ? { transactionPosition } : {}) },
    [{ table, changes }],
  );
}

/** Two batches inside one transaction, then the one that ends it. */
async function walkThroughTransaction(destination: Destination, table: DestinationTable, mirror: string) {
  await destination.setupTables([table]);
  const before = 0x0012_3456_0000_0001n;
  await destination.syncBatch(
    batch(destination, mirror, table, 1n, [1, 2], before, position(commitLsn - 500n, 1)),
  );
  expect(await destination.readCheckpoint(mirror)).toEqual({
    batchId: 1n,
    lsn: before,
    transactionPosition: position(commitLsn - 500n, 1),
  });
  // Rows of one multi-insert record: same LSN, a later rank.
  await destination.syncBatch(
    batch(destination, mirror, table, 2n, [3, 4], before, position(commitLsn - 400n, 7)),
  );
  expect((await destination.readCheckpoint(mirror))?.transactionPosition).toEqual(
    position(commitLsn - 400n, 7),
  );
  await destination.syncBatch(batch(destination, mirror, table, 3n, [5], commitLsn + 1n));
  const done = await destination.readCheckpoint(mirror);
  expect(done).toEqual({ batchId: 3n, lsn: commitLsn + 1n });
  expect(done?.transactionPosition).toBeUndefined();
}

describe('PostgreSQL destination: transaction positions', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase('ckpt_pos');
  });
  afterAll(async () => {
    await database?.drop();
  });

  const newDestination = () =>
    new PostgresDestination(database.config, {
      system: 'PG',
      mirrorColumns: {},
      applicationName: 'tributary:checkpoint-positions',
      logger,
    });

  it('stores, reads back and clears the position with the batch', async () => {
    const destination = newDestination();
    try {
      await walkThroughTransaction(destination, idTextTable('positions'), 'pg-positions');
    } finally {
      await destination.close();
    }
  });

  it('adds the position columns to a checkpoint table made before them', async () => {
    const { client } = database;
    await client.query(`DROP SCHEMA IF EXISTS _tributary CASCADE`);
    await client.query(`CREATE SCHEMA _tributary`);
    await client.query(
      `CREATE TABLE _tributary.checkpoints (mirror text PRIMARY KEY, batch_id bigint NOT NULL,
         lsn numeric(20, 0) NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())`,
    );
    await client.query(`INSERT INTO _tributary.checkpoints (mirror, batch_id, lsn) VALUES ('old', 4, 4096)`);
    const destination = newDestination();
    try {
      // Read before setup, as the old table is: no position.
      expect(await destination.readCheckpoint('old')).toEqual({ batchId: 4n, lsn: 4096n });
      await destination.setupTables([idTextTable('upgraded')]);
      expect(await destination.readCheckpoint('old')).toEqual({ batchId: 4n, lsn: 4096n });
      await destination.syncBatch(
        batch(destination, 'old', idTextTable('upgraded'), 5n, [1], 4096n, position(5000n, 2)),
      );
      expect((await destination.readCheckpoint('old'))?.transactionPosition).toEqual(position(5000n, 2));
    } finally {
      await destination.close();
    }
  });
});

describe.each(clickhouseEngines)('ClickHouse destination on $name: transaction positions', (engine) => {
  const database = `tributary_pos_${randomBytes(4).toString('hex')}`;
  let admin: ClickHouseClient;
  beforeAll(async () => {
    const config = engine.config('default');
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
  });

  const newDestination = (name: string) =>
    new ClickHouseDestination(engine.config(name), {
      mirror: name,
      mirrorColumns: {},
      tableMappings: [],
      maxBatchSize: 1_000_000,
      logger,
    });

  it('stores, reads back and clears the position with the batch', async () => {
    const destination = newDestination(database);
    try {
      await walkThroughTransaction(destination, idTextTable('positions'), 'ch-positions');
    } finally {
      await destination.close();
    }
  });

  it('adds the position columns to a checkpoint table made before them', async () => {
    const old = `${database}_old`;
    await admin.command({ query: `CREATE DATABASE ${old}` });
    const destination = newDestination(old);
    try {
      await admin.command({
        query: `CREATE TABLE ${old}._tributary_checkpoints (mirror String, batch_id UInt64, lsn UInt64,
          version_base UInt64, seq UInt64, updated_at DateTime('UTC') DEFAULT now())
          ENGINE = ReplacingMergeTree(seq) ORDER BY mirror`,
      });
      await admin.command({
        query: `INSERT INTO ${old}._tributary_checkpoints (mirror, batch_id, lsn, version_base, seq) VALUES ('old', 4, 4096, 0, 1)`,
      });
      await destination.setupTables([idTextTable('upgraded')]);
      expect(await destination.readCheckpoint('old')).toEqual({ batchId: 4n, lsn: 4096n });
      await destination.syncBatch(
        batch(destination, 'old', idTextTable('upgraded'), 5n, [1], 4096n, position(5000n, 2)),
      );
      expect((await destination.readCheckpoint('old'))?.transactionPosition).toEqual(position(5000n, 2));
    } finally {
      await destination.close();
      await admin.command({ query: `DROP DATABASE IF EXISTS ${old}` });
    }
  });
});

describe('Kafka destination: transaction positions', () => {
  it('stores, reads back and clears the position with the batch', async () => {
    const topic = randomTopic('positions');
    const destination = new KafkaDestination(streamConfig('PLAINTEXT', ''), {
      mirror: `m-${topic}`,
      logger,
    });
    const mirror = `mirror-${topic}`;
    try {
      await walkThroughTransaction(destination, idTextTable(topic), mirror);
      // Read by a fresh destination from the compacted topic, not from the writer's memory.
      const reader = new KafkaDestination(streamConfig('PLAINTEXT', ''), {
        mirror: `m-${topic}`,
        logger,
      });
      try {
        expect(await reader.readCheckpoint(mirror)).toEqual({ batchId: 3n, lsn: commitLsn + 1n });
      } finally {
        await reader.close();
      }
    } finally {
      await destination.removeCheckpoint(mirror).catch(() => {});
      await destination.close();
      await deleteTopics(kafkaClient('PLAINTEXT'), [topic]);
    }
  });
});

describe('Snowflake destination (emulator): transaction positions', () => {
  it('stores, reads back and clears the position with the batch, in the checkpoint row', async () => {
    const config = emulatorConfig(uniqueName('POSITIONS'));
    const mirror = `positions-${randomBytes(4).toString('hex')}`;
    const options = { mirror, mirrorColumns: {}, logger };
    const destination = new SnowflakeDestination(config, options);
    try {
      await walkThroughTransaction(destination, idTextTable('positions'), mirror);
      // Read by a fresh destination: from the CHECKPOINTS table, not the writer's memory.
      const reader = new SnowflakeDestination(config, options);
      try {
        expect(await reader.readCheckpoint(mirror)).toEqual({ batchId: 3n, lsn: commitLsn + 1n });
      } finally {
        await reader.close();
      }
    } finally {
      await destination.removeCheckpoint(mirror).catch(() => {});
      await destination.close();
    }
  });
});

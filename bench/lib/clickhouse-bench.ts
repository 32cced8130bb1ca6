// A ClickHouse destination of its own for a bench script, on one test engine:
// a database with a random suffix, an admin client to query it, and the
// destination writing into it; `close` drops the database.
import { randomBytes } from 'node:crypto';
import { type ClickHouseClient, createClient } from '@clickhouse/client';
import pino from 'pino';
import { ClickHouseDestination } from '../../engine/src/connectors/clickhouse/destination.ts';
import type { AnalyticsConfig } from '../../engine/src/resources/peer.ts';
import type { ClickHouseEngine } from '../../test/support/clickhouse-engines.ts';

export interface BenchDestination {
  readonly database: string;
  readonly config: AnalyticsConfig;
  readonly admin: ClickHouseClient;
  readonly destination: ClickHouseDestination;
  close(): Promise<void>;
}

export async function benchDestination(engine: ClickHouseEngine, prefix: string): Promise<BenchDestination> {
  const database = `${prefix}_${randomBytes(4).toString('hex')}`;
  const config = engine.config(database);
  const admin = createClient({
    url: `http://127.0.0.1:${config.httpPort}`,
    username: config.user,
    password: config.password,
    request_timeout: 600_000,
    clickhouse_settings: { send_progress_in_http_headers: 1, http_headers_progress_interval_ms: '10000' },
  });
  await admin.command({ query: `CREATE DATABASE ${database}` });
  const destination = new ClickHouseDestination(config, {
    mirror: 'bench',
    mirrorColumns: {},
    tableMappings: [],
    maxBatchSize: 1_000_000,
    logger: pino({ level: 'warn' }),
  });
  return {
    database,
    config,
    admin,
    destination,
    async close() {
      await destination.close();
      await admin.command({ query: `DROP DATABASE IF EXISTS ${database}` });
      await admin.close();
    },
  };
}

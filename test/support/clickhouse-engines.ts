// The two ClickHouse engines of the test environment as analytics peer
// configs: the Debian clickhouse-server 18.16 (exercises the fallbacks) and
// current ClickHouse through chdb's HTTP front.
import type { AnalyticsConfig } from '../../engine/src/resources/peer.ts';
import { clickhouse } from './testenv.ts';

export interface ClickHouseEngine {
  readonly name: string;
  /** Current ClickHouse: DateTime64, Date32, Bool, Map, is_deleted. */
  readonly modern: boolean;
  config(database: string): AnalyticsConfig;
}

export const clickhouseEngines: readonly ClickHouseEngine[] = [
  {
    name: 'clickhouse-server 18.16',
    modern: false,
    config: (database) => ({
      host: '127.0.0.1',
      port: clickhouse.server.nativePort,
      httpPort: Number(new URL(clickhouse.server.url).port),
      user: clickhouse.server.user,
      password: clickhouse.server.password,
      database,
      disableTls: true,
    }),
  },
  {
    name: 'chdb (current ClickHouse)',
    modern: true,
    config: (database) => ({
      host: '127.0.0.1',
      port: 9000,
      httpPort: Number(new URL(clickhouse.chdb.url).port),
      user: 'default',
      password: '',
      database,
      disableTls: true,
    }),
  },
];

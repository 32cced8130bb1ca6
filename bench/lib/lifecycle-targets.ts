// The destinations of the table-lifecycle group, each as the running service
// sees it (a peer of /api/v1/peers/create and the identifiers of its table
// mappings) and as the group reads it back: the highest key visible in each
// latency table (polled to time when rows become visible), a per-row time the
// destination itself stamps, the row count a reader sees, and the rows as
// canonical text to compare with the source's row by row.
import { type ClickHouseClient, createClient } from '@clickhouse/client';
import pg from 'pg';
import type { AnalyticsConfig } from '../../engine/src/resources/peer.ts';
import { clickhouseEngines } from '../../test/support/clickhouse-engines.ts';
import type { TestDatabase } from '../../test/support/databases.ts';
import {
  emulatorConfig,
  emulatorUrl,
  SnowflakeAdmin,
  uniqueName as snowflakeName,
  testPrivateKey,
} from '../../test/support/snowflake-peer.ts';
import { kafka } from '../../test/support/testenv.ts';
import {
  closeMessageCounter,
  consumeTopic,
  createTopic,
  deleteTopic,
  messageCount,
} from '../systems/kafka-topic.ts';
import type { LifecycleDestination } from './config.ts';
import { ServerCpu } from './server-cpu.ts';
import { targetDatabase, uniqueName } from './servers.ts';

/** A row as the comparison reads it: its key and its moved columns as canonical text. */
export interface CanonicalRow {
  readonly id: bigint;
  readonly text: string;
}

/** The columns every table of the group has (bench/lib/workload.ts `tableColumns`). */
interface RowCells {
  readonly id: string;
  readonly account: string | null;
  readonly amount: string | null;
  readonly note: string | null;
  readonly created: string | null;
}

/** `12.50` and `12.5` are one value: trailing zeros of the fraction dropped. */
function decimalText(text: string): string {
  return text.includes('.') ? text.replace(/0+$/, '').replace(/\.$/, '') : text;
}

/** A UTC timestamp as `YYYY-MM-DD HH:MM:SS.ffffff`, from any of the destinations' spellings. */
function timestampText(text: string): string {
  const match = /^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:\.(\d{1,6}))?(?:Z|[+-]00(?::?00)?)?$/.exec(
    text,
  );
  if (!match) throw new Error(`a timestamp the comparison cannot read: ${JSON.stringify(text)}`);
  return `${match[1]} ${match[2]}.${(match[3] ?? '').padEnd(6, '0')}`;
}

export function canonicalRow(cells: RowCells): CanonicalRow {
  const text = [
    cells.id,
    cells.account ?? 'null',
    cells.amount === null ? 'null' : decimalText(cells.amount),
    cells.note ?? 'null',
    cells.created === null ? 'null' : timestampText(cells.created),
  ].join('|');
  return { id: BigInt(cells.id), text };
}

/** The source's rows of `table` with keys in (after, upTo] (no upper bound when undefined), in key order. */
export async function sourceRows(
  client: pg.ClientBase,
  table: string,
  after: bigint,
  upTo: bigint | undefined,
  limit: number,
): Promise<CanonicalRow[]> {
  // Ordered by the column, not by the output's text of the same name.
  const result = await client.query<RowCells>(
    `SELECT id::text AS id, account::text AS account, amount::text AS amount, note,
            to_char(created AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') AS created
       FROM ${table} t WHERE t.id > $1 ${upTo === undefined ? '' : 'AND t.id <= $3'}
      ORDER BY t.id LIMIT $2`,
    upTo === undefined ? [after.toString(), limit] : [after.toString(), limit, upTo.toString()],
  );
  return result.rows.map(canonicalRow);
}

export interface LifecycleTarget {
  readonly kind: LifecycleDestination;
  /** What a reader of the results needs to know of it (server, version). */
  readonly description: string;
  /** The `peer` of /api/v1/peers/create. */
  peer(name: string): Record<string, unknown>;
  /** The destination table identifier of a mapping of source table `table` (Kafka: the topic). */
  destinationIdentifier(table: string): string;
  /** Options of the mirror this destination needs (`connection_configs` fields). */
  readonly mirrorOptions: Readonly<Record<string, unknown>>;
  /** How a row's visible time is taken at this destination. */
  readonly visibleBy: string;
  /**
   * The highest key visible in each of `tables`, in one round (the group polls
   * it to time when rows become visible); undefined where the destination's
   * own stamp is taken as the visible time.
   */
  readonly maxIds: ((tables: readonly string[]) => Promise<number[]>) | undefined;
  /**
   * Per key 1..`rowCount` of `table`, the destination's own stamp in ms: the
   * synced-at column (PostgreSQL: now() of the writing transaction, i.e. its
   * start; ClickHouse: the server's time of the insert; Snowflake:
   * CURRENT_TIMESTAMP() of the writing statement) or the message's producer
   * timestamp (Kafka); NaN where a key has none.
   */
  stamps(table: string, rowCount: number): Promise<Float64Array>;
  /** How many rows of a latency table (keys 1, 2, … in commit order) have arrived: its highest key, or a topic's messages. */
  arrived(table: string): Promise<number>;
  /** A reader of the table's row count as readers see it; undefined where there is no such reader (Kafka). */
  readonly countReader: (() => Promise<TableCounter>) | undefined;
  /** The CPU of the destination server's processes, where the group can read it (a PostgreSQL server). */
  serverCpu(): Promise<ServerCpu | undefined>;
  /** The destination's rows with keys in (after, upTo], in key order. */
  rows(table: string, after: bigint, upTo: bigint | undefined): Promise<CanonicalRow[]>;
  close(): Promise<void>;
}

export interface TableCounter {
  count(table: string): Promise<number>;
  close(): Promise<void>;
}

class PostgresTarget implements LifecycleTarget {
  readonly kind = 'pg' as const;
  readonly description = 'PostgreSQL 15, the benchmark target server (bench/sh/target-postgres.sh)';
  readonly mirrorOptions = { synced_at_col_name: '_synced_at' };
  readonly #database: TestDatabase;

  constructor(database: TestDatabase) {
    this.#database = database;
  }

  peer(name: string) {
    const { host, port, user, password, database } = this.#database.config;
    return { name, type: 3, relational_config: { host, port, user, password, database } };
  }

  destinationIdentifier(table: string): string {
    return `public.${table}`;
  }

  readonly visibleBy =
    `the first poll (every 20 ms, from its start) that sees the row's key as the table's highest`;

  readonly maxIds = async (tables: readonly string[]): Promise<number[]> => {
    const result = await this.#database.client.query<Record<string, string | null>>(
      `SELECT ${tables.map((table, index) => `(SELECT max(id) FROM ${table}) AS m${index}`).join(', ')}`,
    );
    const row = result.rows[0] ?? {};
    return tables.map((_, index) => Number(row[`m${index}`] ?? 0));
  };

  async arrived(table: string): Promise<number> {
    return (await this.maxIds([table]))[0] ?? 0;
  }

  async stamps(table: string, rowCount: number): Promise<Float64Array> {
    const stamps = new Float64Array(rowCount + 1).fill(Number.NaN);
    const result = await this.#database.client.query<{ id: number; ms: number }>(
      `SELECT id::int AS id, extract(epoch FROM _synced_at)::float8 * 1000 AS ms FROM ${table}`,
    );
    for (const row of result.rows) if (row.id <= rowCount) stamps[row.id] = row.ms;
    return stamps;
  }

  readonly countReader = async (): Promise<TableCounter> => {
    const client = new pg.Client(this.#database.config);
    await client.connect();
    return {
      async count(table) {
        const result = await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
        return result.rows[0]?.n ?? Number.NaN;
      },
      close: () => client.end(),
    };
  };

  serverCpu(): Promise<ServerCpu> {
    return ServerCpu.of(this.#database.client);
  }

  rows(table: string, after: bigint, upTo: bigint | undefined): Promise<CanonicalRow[]> {
    return sourceRows(this.#database.client, table, after, upTo, Number.MAX_SAFE_INTEGER);
  }

  close(): Promise<void> {
    return this.#database.drop();
  }
}

/** Current ClickHouse (chdb): its synced-at column has microseconds (18.16's has seconds) and it swaps a resynced table with EXCHANGE TABLES. */
const chdb = clickhouseEngines.find((engine) => engine.modern);

class ClickHouseTarget implements LifecycleTarget {
  readonly kind = 'clickhouse' as const;
  readonly description: string;
  readonly mirrorOptions = { synced_at_col_name: '_synced_at' };
  readonly #database: string;
  readonly #config: AnalyticsConfig;
  readonly #client: ClickHouseClient;

  private constructor(database: string, version: string, client: ClickHouseClient) {
    if (!chdb) throw new Error('no current ClickHouse among the test engines');
    this.#database = database;
    this.#config = chdb.config(database);
    this.#client = client;
    this.description = `ClickHouse ${version} (chdb, the test environment's current ClickHouse)`;
  }

  static async create(): Promise<ClickHouseTarget> {
    if (!chdb) throw new Error('no current ClickHouse among the test engines');
    const database = uniqueName('bench_tl');
    const client = ClickHouseTarget.#newClient(chdb.config(database));
    await client.command({ query: `CREATE DATABASE ${database}` });
    const version = await ClickHouseTarget.#query<{ v: string }>(client, 'SELECT version() AS v');
    return new ClickHouseTarget(database, version[0]?.v ?? 'unknown', client);
  }

  static #newClient(config: AnalyticsConfig) {
    return createClient({
      url: `http://${config.host}:${config.httpPort}`,
      username: config.user,
      password: config.password,
      // The comparison's reads of a large table: progress headers keep the connection from going idle.
      request_timeout: 600_000,
      clickhouse_settings: { send_progress_in_http_headers: 1, http_headers_progress_interval_ms: '10000' },
    });
  }

  static async #query<T>(client: ClickHouseClient, query: string): Promise<T[]> {
    return (await client.query({ query, format: 'JSONEachRow' })).json<T>();
  }

  peer(name: string) {
    const { host, port, httpPort, user, password, database } = this.#config;
    return {
      name,
      type: 8,
      analytics_config: { host, port, http_port: httpPort, user, password, database, disable_tls: true },
    };
  }

  destinationIdentifier(table: string): string {
    // `public` means the peer's database.
    return `public.${table}`;
  }

  readonly maxIds = undefined;
  readonly visibleBy =
    "the synced-at column, the server's time of the insert (the test front runs one request at a time: a poll every 20 ms would queue before the engine's inserts)";

  async arrived(table: string): Promise<number> {
    const [row] = await ClickHouseTarget.#query<{ m: string | number | null }>(
      this.#client,
      `SELECT max(id) AS m FROM ${this.#database}.${table}`,
    );
    return Number(row?.m ?? 0);
  }

  async stamps(table: string, rowCount: number): Promise<Float64Array> {
    const stamps = new Float64Array(rowCount + 1).fill(Number.NaN);
    const rows = await ClickHouseTarget.#query<{ id: string | number; us: string | number }>(
      this.#client,
      `SELECT id, toUnixTimestamp64Micro(_synced_at) AS us FROM ${this.#database}.${table} FINAL`,
    );
    for (const row of rows) {
      const id = Number(row.id);
      if (id <= rowCount) stamps[id] = Number(row.us) / 1000;
    }
    return stamps;
  }

  readonly countReader = async (): Promise<TableCounter> => {
    const client = ClickHouseTarget.#newClient(this.#config);
    const database = this.#database;
    return {
      async count(table) {
        // As readers see it: FINAL, rows marked deleted filtered (docs/clickhouse.md, "Reading").
        const [row] = await ClickHouseTarget.#query<{ n: string | number }>(
          client,
          `SELECT count() AS n FROM ${database}.${table} FINAL WHERE _tributary_is_deleted = 0`,
        );
        return Number(row?.n);
      },
      close: () => client.close(),
    };
  };

  async serverCpu(): Promise<undefined> {
    return undefined;
  }

  async rows(table: string, after: bigint, upTo: bigint | undefined): Promise<CanonicalRow[]> {
    // Each cell named with a space, as no column is: ClickHouse resolves a name to an alias of the same SELECT before the column.
    const rows = await ClickHouseTarget.#query<Record<string, string | null>>(
      this.#client,
      `SELECT toString(id) AS \`cell id\`, toString(account) AS \`cell account\`, toString(amount) AS \`cell amount\`,
              note AS \`cell note\`, toString(created) AS \`cell created\`
         FROM ${this.#database}.${table} FINAL
        WHERE _tributary_is_deleted = 0 AND id > ${after} ${upTo === undefined ? '' : `AND id <= ${upTo}`}
        ORDER BY id`,
    );
    return rows.map((row) =>
      canonicalRow({
        id: String(row['cell id']),
        account: row['cell account'] ?? null,
        amount: row['cell amount'] ?? null,
        note: row['cell note'] ?? null,
        created: row['cell created'] ?? null,
      }),
    );
  }

  async close(): Promise<void> {
    await this.#client.command({ query: `DROP DATABASE IF EXISTS ${this.#database}` }).catch(() => {});
    await this.#client.close();
  }
}

/** A message's value as docs/kafka.md "Messages" describes it, the fields the group reads. */
interface KafkaValue {
  readonly kind: string;
  readonly new: Record<string, string | number | null> | null;
}

class KafkaTarget implements LifecycleTarget {
  readonly kind = 'kafka' as const;
  readonly description = `Kafka 3.9, the test broker (${kafka.plaintextBroker}), one partition a topic`;
  readonly mirrorOptions = {};
  readonly maxIds = undefined;
  readonly visibleBy = "the message's producer timestamp (CreateTime): when the engine produced it";
  readonly countReader = undefined;
  readonly #prefix = uniqueName('bench_tl');
  readonly #topics = new Set<string>();
  /** Each topic folded by key as a consumer does, read once the run is over. */
  readonly #folded = new Map<string, CanonicalRow[]>();

  topic(table: string): string {
    return `${this.#prefix}_${table}`;
  }

  /** The topics of `tables`, made beforehand with one partition: the messages of a table in one order. */
  async createTopics(tables: readonly string[]): Promise<void> {
    for (const table of tables) {
      await createTopic(this.topic(table));
      this.#topics.add(this.topic(table));
    }
  }

  peer(name: string) {
    return { name, type: 9, stream_config: { servers: kafka.plaintextBroker, disable_tls: true } };
  }

  destinationIdentifier(table: string): string {
    return `public.${this.topic(table)}`;
  }

  arrived(table: string): Promise<number> {
    return messageCount(this.topic(table));
  }

  async stamps(table: string, rowCount: number): Promise<Float64Array> {
    const stamps = new Float64Array(rowCount + 1).fill(Number.NaN);
    const topic = this.topic(table);
    await consumeTopic(topic, await messageCount(topic), (message) => {
      const key = JSON.parse(message.key ?? 'null') as { id?: string } | null;
      const id = Number(key?.id);
      if (id <= rowCount && Number.isNaN(stamps[id] ?? 0)) stamps[id] = message.timestampMs;
    });
    return stamps;
  }

  async serverCpu(): Promise<undefined> {
    return undefined;
  }

  async rows(table: string, after: bigint, upTo: bigint | undefined): Promise<CanonicalRow[]> {
    let folded = this.#folded.get(table);
    if (!folded) {
      folded = await this.#fold(this.topic(table));
      this.#folded.set(table, folded);
    }
    return folded.filter((row) => row.id > after && (upTo === undefined || row.id <= upTo));
  }

  /** The topic folded by key: the last message of each key, a delete removing it. */
  async #fold(topic: string): Promise<CanonicalRow[]> {
    const byKey = new Map<string, CanonicalRow>();
    await consumeTopic(topic, await messageCount(topic), (message) => {
      const value = JSON.parse(message.value ?? 'null') as KafkaValue | null;
      const key = message.key ?? 'null';
      if (!value || value.kind === 'delete') byKey.delete(key);
      else if (value.new) {
        const cell = (name: string) => (value.new?.[name] == null ? null : String(value.new[name]));
        byKey.set(
          key,
          canonicalRow({
            id: String(value.new.id),
            account: cell('account'),
            amount: cell('amount'),
            note: cell('note'),
            created: cell('created'),
          }),
        );
      }
    });
    return [...byKey.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  async close(): Promise<void> {
    for (const topic of this.#topics) await deleteTopic(topic);
    // Its client would keep the process alive.
    await closeMessageCounter();
  }
}

class SnowflakeTarget implements LifecycleTarget {
  readonly kind = 'snowflake' as const;
  readonly description = `the Snowflake emulator (fakesnow: DuckDB in one Python process, ${emulatorUrl})`;
  readonly mirrorOptions = { synced_at_col_name: '_synced_at' };
  readonly #config = emulatorConfig(snowflakeName('BENCH_TL'));
  readonly #admin = new SnowflakeAdmin(this.#config);

  #table(table: string): string {
    return `"${this.#config.database}"."PUBLIC"."${table.toUpperCase()}"`;
  }

  peer(name: string) {
    const config = this.#config;
    return {
      name,
      type: 1,
      datawarehouse_config: {
        account_id: config.accountId,
        username: config.username,
        private_key: testPrivateKey(),
        database: config.database,
        warehouse: config.warehouse,
        role: config.role,
        query_timeout: 60,
        access_url: config.accessUrl,
      },
    };
  }

  destinationIdentifier(table: string): string {
    return `public.${table}`;
  }

  readonly maxIds = undefined;
  readonly visibleBy =
    'the synced-at column, CURRENT_TIMESTAMP() of the statement that wrote the row (the emulator is one process: a poll every 20 ms would load it)';

  async arrived(table: string): Promise<number> {
    const [row] = await this.#admin.rows(`SELECT MAX("ID") AS "M" FROM ${this.#table(table)}`);
    return Number(row?.M ?? 0);
  }

  async stamps(table: string, rowCount: number): Promise<Float64Array> {
    const stamps = new Float64Array(rowCount + 1).fill(Number.NaN);
    const rows = await this.#admin.rows(
      `SELECT "ID" AS "ID", DATE_PART(EPOCH_MICROSECOND, "_SYNCED_AT") AS "US" FROM ${this.#table(table)}`,
    );
    for (const row of rows) {
      const id = Number(row.ID);
      if (id <= rowCount) stamps[id] = Number(row.US) / 1000;
    }
    return stamps;
  }

  readonly countReader = async (): Promise<TableCounter> => {
    const reader = new SnowflakeAdmin(this.#config);
    const name = (table: string) => this.#table(table);
    return {
      async count(table) {
        const [row] = await reader.rows(`SELECT COUNT(*) AS "N" FROM ${name(table)}`);
        return Number(row?.N);
      },
      close: () => reader.close(),
    };
  };

  async serverCpu(): Promise<undefined> {
    return undefined;
  }

  async rows(table: string, after: bigint, upTo: bigint | undefined): Promise<CanonicalRow[]> {
    const rows = await this.#admin.rows(
      `SELECT TO_VARCHAR("ID") AS "I", TO_VARCHAR("ACCOUNT") AS "A", TO_VARCHAR("AMOUNT") AS "M", "NOTE" AS "N",
              TO_VARCHAR("CREATED") AS "C"
         FROM ${this.#table(table)}
        WHERE "ID" > ${after} ${upTo === undefined ? '' : `AND "ID" <= ${upTo}`} ORDER BY "ID"`,
    );
    const text = (value: unknown) => (value === null || value === undefined ? null : String(value));
    return rows.map((row) =>
      canonicalRow({
        id: String(row.I),
        account: text(row.A),
        amount: text(row.M),
        note: text(row.N),
        created: text(row.C),
      }),
    );
  }

  async close(): Promise<void> {
    await this.#admin.rows(`DROP DATABASE IF EXISTS "${this.#config.database}"`).catch(() => {});
    await this.#admin.close();
  }
}

/** A destination of `kind` made for one run, with `tables` to be mapped into it. */
export async function lifecycleTarget(
  kind: LifecycleDestination,
  tables: readonly string[],
): Promise<LifecycleTarget> {
  switch (kind) {
    case 'pg':
      return new PostgresTarget(await targetDatabase('bench_tl_dst'));
    case 'clickhouse':
      return ClickHouseTarget.create();
    case 'kafka': {
      const target = new KafkaTarget();
      await target.createTopics(tables);
      return target;
    }
    case 'snowflake':
      return new SnowflakeTarget();
  }
}

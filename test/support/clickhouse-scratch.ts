// A ClickHouse database of a test's own, with the readers the end-to-end tests
// compare against the source: a table's `(id, v)` rows as readers see them
// (FINAL, deleted rows filtered: 18.16 has no is_deleted engine parameter),
// its row count, the tables present.
import { type ClickHouseClient, createClient } from '@clickhouse/client';
import type pg from 'pg';
import { expect } from 'vitest';
import type { AnalyticsConfig } from '../../engine/src/resources/peer.ts';
import type { ClickHouseEngine } from './clickhouse-engines.ts';
import { randomSuffix, waitFor } from './databases.ts';

/** A row of a test table `(id int, v text)`, the key as text. */
export type IdRow = readonly [string, string | null];

/** Rows in their keys' numeric order (text order differs between the servers for negative keys). */
export const byId = (rows: IdRow[]): IdRow[] => rows.sort((a, b) => Number(a[0]) - Number(b[0]));

export async function sourceIdRows(client: pg.Client, table: string): Promise<IdRow[]> {
  const result = await client.query<{ id: string; v: string | null }>(`SELECT id::text, v FROM ${table}`);
  return byId(result.rows.map((row) => [row.id, row.v] as const));
}

export class ClickHouseScratch {
  readonly database: string;
  readonly config: AnalyticsConfig;
  #admin: ClickHouseClient | undefined;

  constructor(engine: ClickHouseEngine, prefix: string) {
    this.database = `tributary_${prefix}_${randomSuffix()}`;
    this.config = engine.config(this.database);
  }

  /** A client of the server (not bound to the database). */
  client(): ClickHouseClient {
    return createClient({
      url: `http://${this.config.host}:${this.config.httpPort}`,
      username: this.config.user,
      password: this.config.password,
    });
  }

  get admin(): ClickHouseClient {
    if (!this.#admin) throw new Error('ClickHouseScratch: create() first');
    return this.#admin;
  }

  async create(): Promise<void> {
    this.#admin = this.client();
    await this.#admin.command({ query: `CREATE DATABASE ${this.database}` });
  }

  async drop(): Promise<void> {
    await this.#admin?.command({ query: `DROP DATABASE IF EXISTS ${this.database}` }).catch(() => {});
    await this.#admin?.close();
  }

  /** `table` as its readers see it: FINAL, rows marked deleted filtered. */
  visible(table: string): string {
    return `${this.database}.${table} FINAL WHERE _tributary_is_deleted = 0`;
  }

  async rows(table: string): Promise<IdRow[]> {
    const result = await this.admin.query({
      query: `SELECT toString(id) AS id, v FROM ${this.visible(table)}`,
      format: 'JSONEachRow',
    });
    return byId(
      (await result.json<{ id: string; v: string | null }>()).map((row) => [row.id, row.v] as const),
    );
  }

  async count(table: string, client: ClickHouseClient = this.admin): Promise<number> {
    const result = await client.query({
      query: `SELECT count() AS n FROM ${this.visible(table)}`,
      format: 'JSONEachRow',
    });
    return Number((await result.json<{ n: string | number }>())[0]?.n);
  }

  /** The database's tables by name, those ending in `suffix` when given. */
  async tables(suffix = ''): Promise<string[]> {
    const result = await this.admin.query({
      query: `SELECT name FROM system.tables WHERE database = '${this.database}' AND endsWith(name, '${suffix}') ORDER BY name`,
      format: 'JSONEachRow',
    });
    return (await result.json<{ name: string }>()).map((row) => row.name);
  }

  /** Waits until `table` equals the source's, then compares them, naming at most five rows that differ. */
  async expectSameRows(source: pg.Client, table: string, timeoutMs = 120_000): Promise<void> {
    await waitFor(
      async () =>
        JSON.stringify(await this.rows(table).catch(() => [])) ===
        JSON.stringify(await sourceIdRows(source, table)),
      timeoutMs,
      `${table} equal`,
    ).catch(() => {});
    const [actual, expected] = [await this.rows(table), await sourceIdRows(source, table)];
    const actualById = new Map(actual.map((row) => [row[0], row]));
    const differing = expected.filter(
      (row) => JSON.stringify(actualById.get(row[0])) !== JSON.stringify(row),
    );
    expect({ rows: actual.length, differing: differing.slice(0, 5) }).toEqual({
      rows: expected.length,
      differing: [],
    });
  }
}

// The HTTP transport of a ClickHouse destination: one client per destination,
// the server's version and capabilities read once, and every request's
// failure classified where it happens (classify/clickhouse.ts).
import { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import type { ClickHouseClient } from '@clickhouse/client';
import type { AnalyticsConfig } from '../../resources/peer.ts';
import { classifyClickHouseError } from '../classify/index.ts';
import { createAnalyticsClient } from './client.ts';
import type { DateLimits } from './row-binary.ts';
import { type ServerCapabilities, serverCapabilities } from './server.ts';

/**
 * Socket idle timeout of a request. Inserts stream continuously; the client
 * wants progress headers above 60 s, which would hide late insert errors.
 */
const requestTimeoutMs = 60_000;

export type CommandFailureKind = 'destination_write' | 'schema_mismatch';

export class ClickHouseTransport {
  readonly #config: AnalyticsConfig;
  #client: Promise<ClickHouseClient> | undefined;
  #capabilities: ServerCapabilities | undefined;
  #versionText = 'unknown';

  constructor(config: AnalyticsConfig) {
    this.#config = config;
  }

  /** The server's `version()`, once `server()` has read it. */
  get versionText(): string {
    return this.#versionText;
  }

  #connection(): Promise<ClickHouseClient> {
    if (!this.#client) {
      const client = createAnalyticsClient(this.#config, requestTimeoutMs);
      // A client that could not be made is not kept: the next request tries again.
      client.catch(() => {
        if (this.#client === client) this.#client = undefined;
      });
      this.#client = client;
    }
    return this.#client;
  }

  async server(): Promise<ServerCapabilities> {
    if (this.#capabilities) return this.#capabilities;
    const [row] = await this.rows<{ version: string }>('SELECT version() AS version', 'read server version');
    this.#versionText = row?.version ?? 'unknown';
    this.#capabilities = serverCapabilities(this.#versionText);
    return this.#capabilities;
  }

  async limits(): Promise<DateLimits> {
    return { date32: (await this.server()).extendedDateRange };
  }

  async rows<T>(query: string, what: string): Promise<T[]> {
    try {
      const result = await (await this.#connection()).query({ query, format: 'JSONEachRow' });
      return await result.json<T>();
    } catch (error) {
      throw classifyClickHouseError(error, `destination: ${what}`, 'destination_write');
    }
  }

  async command(query: string, what: string, kind: CommandFailureKind = 'destination_write'): Promise<void> {
    try {
      await (await this.#connection()).command({ query });
    } catch (error) {
      throw classifyClickHouseError(error, `destination: ${what}`, kind);
    }
  }

  /** Runs a query whose answer is RowBinary and returns it whole. */
  async binary(query: string, settings: Record<string, string>, what: string): Promise<Buffer> {
    try {
      const result = await (await this.#connection()).exec({ query, clickhouse_settings: settings });
      const chunks: Buffer[] = [];
      for await (const chunk of result.stream) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks);
    } catch (error) {
      throw classifyClickHouseError(error, `destination: ${what}`, 'destination_write');
    }
  }

  /**
   * Streams `body` as the data of `insert` (… FORMAT RowBinary), with the
   * request's `settings`. A failure of the body
   * itself (a value that cannot be written) is reported as such, not as the
   * aborted request it causes.
   */
  async insert(
    insert: string,
    body: () => AsyncGenerator<Buffer>,
    what: string,
    settings: Record<string, string> = {},
  ): Promise<void> {
    let bodyError: unknown;
    const guarded = async function* () {
      try {
        yield* body();
      } catch (error) {
        bodyError = error;
        throw error;
      }
    };
    try {
      const result = await (await this.#connection()).exec({
        query: insert,
        values: Readable.from(guarded()),
        clickhouse_settings: settings,
      });
      result.stream.resume();
      await finished(result.stream);
    } catch (error) {
      throw classifyClickHouseError(bodyError ?? error, `destination: ${what}`, 'destination_write');
    }
  }

  async close(): Promise<void> {
    const client = this.#client;
    this.#client = undefined;
    await client?.then(
      (connected) => connected.close(),
      () => {},
    );
  }
}

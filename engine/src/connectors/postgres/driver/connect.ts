// Opens PostgreSQL connections for a relational peer, through its SSH tunnel when
// one is configured, with the peer's TLS settings (tls.ts): TLS runs end to end
// inside the tunnel (each connection an SSH channel handed to the driver as its
// socket), and the certificate is checked against the peer's host (or
// tls_host). Every connection gets the same
// session settings so that the text form of every value (COPY output, pgoutput
// text tuples) is predictable.
import type { Duplex } from 'node:stream';
import pg from 'pg';
import { SshTunnel } from '../../../net/ssh-tunnel.ts';
import type { RelationalConfig } from '../../../resources/peer.ts';
import { classifyPgError, type Side } from '../../classify/index.ts';
import { isTlsNotOffered, type PostgresTls, postgresTls } from './tls.ts';

/** Settings that fix the text output of dates, times, intervals, floats and bytea. */
export const sessionSettings = {
  DateStyle: 'ISO',
  TimeZone: 'UTC',
  IntervalStyle: 'postgres',
  extra_float_digits: '3',
  bytea_output: 'hex',
} as const;

const sessionOptions = Object.entries(sessionSettings)
  .map(([name, value]) => `-c ${name}=${value}`)
  .join(' ');

export interface ConnectOptions {
  /** `database` opens a logical replication (walsender) connection. */
  readonly replication?: 'database';
  readonly applicationName: string;
  readonly connectTimeoutMs?: number;
  /**
   * The session's `lock_timeout`: a statement that waits longer than this for a
   * lock fails (55P03, classified `busy` and retried) instead of waiting unseen.
   */
  readonly lockTimeoutMs?: number;
  /**
   * Which end of a mirror the connection serves, for the kind of a refused
   * login (errors.ts). A replication connection is always the source's; a peer
   * check has no side.
   */
  readonly side?: Side;
}

/** A connected client; `close()` also closes its SSH tunnel. */
export interface PgConnection {
  readonly client: pg.Client;
  close(): Promise<void>;
}

interface Endpoint {
  /** Each connection's stream through the peer's SSH tunnel; absent: the driver dials the server. */
  readonly stream?: () => Duplex;
  close(): void;
}

/** How the driver reaches the server: directly, or through the peer's SSH tunnel. */
async function openEndpoint(config: RelationalConfig): Promise<Endpoint> {
  if (!config.sshConfig) return { close() {} };
  const tunnel = await SshTunnel.open(config.sshConfig, { host: config.host, port: config.port });
  return { stream: () => tunnel.connection(), close: () => tunnel.close() };
}

function clientConfig(
  config: RelationalConfig,
  endpoint: Endpoint,
  options: ConnectOptions,
  ssl: PostgresTls['ssl'],
): pg.ClientConfig {
  return {
    ssl,
    // Through a tunnel, host and port are the server's as the SSH server reaches
    // it; the driver checks a TLS certificate against the host either way.
    host: config.host,
    port: config.port,
    ...(endpoint.stream ? { stream: endpoint.stream } : {}),
    user: config.user,
    password: config.password,
    database: config.database,
    application_name: options.applicationName,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 15_000,
    options:
      options.lockTimeoutMs === undefined
        ? sessionOptions
        : `${sessionOptions} -c lock_timeout=${Math.round(options.lockTimeoutMs)}`,
    keepAlive: true,
    ...(options.replication ? { replication: options.replication } : {}),
  };
}

function describe(config: RelationalConfig, options: ConnectOptions): string {
  const side = options.side ?? (options.replication ? 'source' : undefined);
  return `${side ? `${side}: ` : ''}connect to ${config.host}:${config.port}/${config.database}`;
}

async function connectClient(
  config: RelationalConfig,
  endpoint: Endpoint,
  options: ConnectOptions,
  ssl: PostgresTls['ssl'],
): Promise<pg.Client> {
  const client = new pg.Client(clientConfig(config, endpoint, options, ssl));
  // An idle client whose socket dies emits 'error'; owners learn of it on their
  // next query, so the event must not crash the process.
  client.on('error', () => {});
  await client.connect();
  return client;
}

export async function connectPostgres(
  config: RelationalConfig,
  options: ConnectOptions,
): Promise<PgConnection> {
  const tls = postgresTls(config);
  const endpoint = await openEndpoint(config);
  let client: pg.Client;
  try {
    client = await connectClient(config, endpoint, options, tls.ssl).catch((error: unknown) => {
      // `prefer`: a server without TLS gets a plain connection, as with libpq.
      if (tls.mode === 'prefer' && isTlsNotOffered(error)) {
        return connectClient(config, endpoint, options, false);
      }
      throw error;
    });
  } catch (error) {
    endpoint.close();
    throw classifyPgError(error, describe(config, options), 'connection', { tlsMode: tls.mode });
  }
  return {
    client,
    async close() {
      try {
        await client.end();
      } finally {
        endpoint.close();
      }
    },
  };
}

export interface PgPool {
  readonly pool: pg.Pool;
  close(): Promise<void>;
}

/** A pool for many short transactions (destination writes, catalog). */
export async function openPostgresPool(
  config: RelationalConfig,
  options: ConnectOptions & { readonly maxConnections?: number },
): Promise<PgPool> {
  const tls = postgresTls(config);
  const endpoint = await openEndpoint(config);
  const newPool = async (ssl: PostgresTls['ssl']): Promise<pg.Pool> => {
    const pool = new pg.Pool({
      ...clientConfig(config, endpoint, options, ssl),
      max: options.maxConnections ?? 4,
    });
    pool.on('error', () => {});
    try {
      const probe = await pool.connect();
      probe.release();
      return pool;
    } catch (error) {
      await pool.end();
      throw error;
    }
  };
  let pool: pg.Pool;
  try {
    pool = await newPool(tls.ssl).catch((error: unknown) => {
      // `prefer`: the probe decides for every connection of the pool.
      if (tls.mode === 'prefer' && isTlsNotOffered(error)) return newPool(false);
      throw error;
    });
  } catch (error) {
    endpoint.close();
    throw classifyPgError(error, describe(config, options), 'connection', { tlsMode: tls.mode });
  }
  return {
    pool,
    async close() {
      try {
        await pool.end();
      } finally {
        endpoint.close();
      }
    },
  };
}

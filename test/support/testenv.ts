// Connection facts for the loopback test services that scripts/testenv/ starts.
// Ports come from scripts/testenv/ports.env so shell and tests never disagree;
// the credentials are test-only and are created by the same scripts.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export const repoRoot = join(import.meta.dirname, '..', '..');
export const testenvDir = join(repoRoot, '.testenv');

function readPorts(): Readonly<Record<string, number>> {
  const text = readFileSync(join(repoRoot, 'scripts', 'testenv', 'ports.env'), 'utf8');
  const ports: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const match = /^(TESTENV_[A-Z0-9_]+)=(\d+)$/.exec(line.trim());
    if (match?.[1] && match[2]) ports[match[1]] = Number(match[2]);
  }
  return Object.freeze(ports);
}

const ports = readPorts();

function port(name: string): number {
  const value = ports[name];
  if (value === undefined) throw new Error(`scripts/testenv/ports.env has no ${name}`);
  return value;
}

/** A PostgreSQL test server; all are set up alike (scripts/testenv/postgres-lib.sh). */
export interface PostgresServer {
  readonly major: number;
  readonly host: string;
  readonly port: number;
  readonly superuser: { readonly user: string; readonly password: string };
  /** A non-superuser with REPLICATION, as production sources usually grant. */
  readonly replicator: { readonly user: string; readonly password: string };
  readonly database: string;
  /** Where initdb, pg_ctl and postgres of this major are, for a test's own server. */
  readonly binaries: string;
}

function postgresServer(major: number, portName: string, binaries: string): PostgresServer {
  return Object.freeze({
    major,
    host: '127.0.0.1',
    port: port(portName),
    superuser: { user: 'tributary_admin', password: 'admin-secret' },
    replicator: { user: 'tributary_repl', password: 'repl-secret' },
    database: 'tributary_test',
    binaries,
  });
}

/** The shared server (PostgreSQL 15, Debian's): every suite's default. */
export const postgres = postgresServer(15, 'TESTENV_PG_PORT', '/usr/lib/postgresql/15/bin');

/** The other majors (scripts/testenv/postgres-versions.sh): the oldest supported, one between, the newest. */
export const otherPostgres: Readonly<Record<13 | 16 | 18, PostgresServer>> = Object.freeze({
  13: postgresServer(13, 'TESTENV_PG13_PORT', join(testenvDir, 'postgres-13', 'install', 'bin')),
  16: postgresServer(16, 'TESTENV_PG16_PORT', join(testenvDir, 'postgres-16', 'install', 'bin')),
  18: postgresServer(18, 'TESTENV_PG18_PORT', join(testenvDir, 'postgres-18', 'install', 'bin')),
});

/** PostgreSQL 12, which sources must not run: its programs only, for a test's own server. */
export const unsupportedPostgres = Object.freeze({
  major: 12,
  binaries: join(testenvDir, 'postgres-12', 'install', 'bin'),
});

/** The newest PostgreSQL release, as a destination of the version runs. */
export const newestPostgres = otherPostgres[18];

/**
 * Where the PostgreSQL suites put their source and destination databases. The
 * vitest projects `postgres-13`, `postgres-16` and `postgres-18` set
 * TRIBUTARY_TEST_SOURCE_POSTGRES to run the source suites on that major, into
 * the newest release as destination, except 16, which writes to the oldest, so
 * both ends of the destination range are written; otherwise both are the shared
 * server. Catalogs stay on the shared server.
 */
function selectServers(): { source: PostgresServer; destination: PostgresServer } {
  const selected = process.env.TRIBUTARY_TEST_SOURCE_POSTGRES;
  if (selected === undefined || selected === '') return { source: postgres, destination: postgres };
  const server = otherPostgres[Number(selected) as keyof typeof otherPostgres];
  if (!server) throw new Error(`TRIBUTARY_TEST_SOURCE_POSTGRES=${selected}: no such test server`);
  return { source: server, destination: server.major === 16 ? otherPostgres[13] : newestPostgres };
}

export const { source: sourcePostgres, destination: destinationPostgres } = selectServers();

/**
 * The TLS test server (scripts/testenv/postgres-tls.sh): its certificate names
 * 127.0.0.1 and localhost and is signed by `tlsDir/ca.crt`; `foreign-ca.crt`
 * signed nothing there. `tlsUser` is admitted only over TLS.
 */
export const postgresTls = Object.freeze({
  host: '127.0.0.1',
  port: port('TESTENV_PG_TLS_PORT'),
  superuser: { user: 'tributary_admin', password: 'admin-secret' },
  tlsUser: { user: 'tributary_tls', password: 'tls-secret' },
  database: 'tributary_test',
  tlsDir: join(testenvDir, 'postgres-tls', 'tls'),
});

export const clickhouse = Object.freeze({
  /** The Debian clickhouse-server (an old release): exercises fallbacks. */
  server: {
    url: `http://127.0.0.1:${port('TESTENV_CH_HTTP_PORT')}`,
    nativePort: port('TESTENV_CH_NATIVE_PORT'),
    user: 'tributary',
    password: 'ch-secret',
    /** HTTPS with a certificate of a test CA; client certificates are verified when sent. */
    httpsPort: port('TESTENV_CH_HTTPS_PORT'),
    /** ca.crt, client.crt/.key (same CA), foreign-ca.crt, foreign-client.crt/.key. */
    tlsDir: join(testenvDir, 'clickhouse', 'tls'),
  },
  /** The in-process chdb engine (current ClickHouse) behind a test-only HTTP front. */
  chdb: {
    url: `http://127.0.0.1:${port('TESTENV_CHDB_HTTP_PORT')}`,
  },
});

export const kafka = Object.freeze({
  plaintextBroker: `127.0.0.1:${port('TESTENV_KAFKA_PLAINTEXT_PORT')}`,
  saslBroker: `127.0.0.1:${port('TESTENV_KAFKA_SASL_PORT')}`,
  /** The listener for the real node's pods: node.sh forwards its gateway address here. */
  podPort: port('TESTENV_KAFKA_POD_PORT'),
  plain: { username: 'tributary', password: 'kafka-plain-secret' },
  /** One user holding credentials for both SCRAM-SHA-256 and SCRAM-SHA-512. */
  scram: { username: 'tributary-scram', password: 'kafka-scram-secret' },
  /** The second broker of scripts/testenv/kafka-tls.sh: TLS listeners only for clients. */
  tls: {
    /** SASL_SSL: PLAIN user `plain` above, over TLS with a certificate of the test CA. */
    saslBroker: `127.0.0.1:${port('TESTENV_KAFKA_TLS_PORT')}`,
    /** SSL: a client certificate of the test CA is required; no SASL. */
    mutualBroker: `127.0.0.1:${port('TESTENV_KAFKA_MTLS_PORT')}`,
    /** ca.crt, client.crt/.key (same CA), foreign-ca.crt, foreign-client.crt/.key. */
    tlsDir: join(testenvDir, 'kafka-tls', 'tls'),
  },
});

export const kube = Object.freeze({
  server: `https://127.0.0.1:${port('TESTENV_KUBE_APISERVER_PORT')}`,
  adminKubeconfig: join(testenvDir, 'kube', 'admin.kubeconfig'),
  /** An identity bound to no roles until a test grants some: proves RBAC refusals. */
  restrictedKubeconfig: join(testenvDir, 'kube', 'restricted.kubeconfig'),
  restrictedUser: 'tributary-restricted',
  /** The kubectl of the same release, built by scripts/testenv/kube.sh. */
  kubectl: join(testenvDir, 'bin', 'kubectl'),
});

export const ssh = Object.freeze({
  host: '127.0.0.1',
  port: port('TESTENV_SSH_PORT'),
  user: 'tributary-ssh',
  password: 'ssh-secret',
  privateKeyPath: join(testenvDir, 'ssh', 'id_ed25519'),
  /** The server's host key as `ssh-ed25519 AAAA… comment`. */
  hostKeyPath: join(testenvDir, 'ssh', 'host_ed25519.pub'),
});

export const snowflake = Object.freeze({
  url: `http://127.0.0.1:${port('TESTENV_SNOWFLAKE_PORT')}`,
  port: port('TESTENV_SNOWFLAKE_PORT'),
});

/** Helm, built by scripts/testenv/helm.sh into the machine-wide cache. */
export const helmBinary = join(
  process.env.XDG_CACHE_HOME ?? join(process.env.HOME ?? '/root', '.cache'),
  'tributary',
  'testenv',
  'helm-v3.19.2',
  'helm',
);

/** Debian's Prometheus server and promtool, unpacked by scripts/testenv/prometheus.sh. */
export const prometheusBinaries = join(
  process.env.XDG_CACHE_HOME ?? join(process.env.HOME ?? '/root', '.cache'),
  'tributary',
  'testenv',
  'prometheus-2.42.0_ds-5_deb12u1',
  'usr',
  'bin',
);

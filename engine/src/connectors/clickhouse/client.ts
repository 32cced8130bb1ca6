// @clickhouse/client for an analytics peer: HTTP(S) on the port derived from the
// native port (see analyticsHttpPort), TLS unless disabled, mutual TLS when a
// client certificate is given. The driver is loaded on first use, so that a
// process without an analytics peer does not hold it (docs/startup.md, Memory).
import type { ClickHouseClient } from '@clickhouse/client';
import { EngineError } from '../../errors.ts';
import { type AnalyticsConfig, analyticsHttpPort } from '../../resources/peer.ts';

let driver: Promise<typeof import('@clickhouse/client')> | undefined;

/** A client of the peer (it connects on its first request). Throws EngineError('config') when the port is unusable. */
export async function createAnalyticsClient(
  config: AnalyticsConfig,
  requestTimeoutMs = 30_000,
): Promise<ClickHouseClient> {
  const httpPort = analyticsHttpPort(config);
  if (httpPort === undefined) {
    throw new EngineError(
      'config',
      `cannot derive the HTTP port from native port ${config.port}: set http_port (9000 maps to 8123, 9440 to 8443)`,
    );
  }
  const scheme = config.disableTls ? 'http' : 'https';
  const tls =
    config.disableTls || !config.rootCa
      ? undefined
      : config.certificate && config.privateKey
        ? {
            ca_cert: Buffer.from(config.rootCa),
            cert: Buffer.from(config.certificate),
            key: Buffer.from(config.privateKey),
          }
        : { ca_cert: Buffer.from(config.rootCa) };
  driver ??= import('@clickhouse/client');
  const { ClickHouseLogLevel, createClient } = await driver;
  return createClient({
    url: `${scheme}://${config.host}:${httpPort}`,
    username: config.user,
    password: config.password,
    database: config.database,
    request_timeout: requestTimeoutMs,
    application: 'tributary',
    // Its own logger writes unstructured lines to the console; every error it
    // would print reaches our code as a rejection and is logged there.
    log: { level: ClickHouseLogLevel.OFF },
    ...(tls ? { tls } : {}),
  });
}

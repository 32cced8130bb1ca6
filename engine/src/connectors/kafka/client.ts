// kafkajs for a stream peer. A fresh `sasl` object per client: kafkajs keeps its
// authenticator on the object it is given, so a reused one logs in with stale
// credentials.
import type { ConnectionOptions } from 'node:tls';
import { promisify } from 'node:util';
import { zstdCompress, zstdDecompress } from 'node:zlib';
import kafkajs, { type CompressionTypes, Kafka, type KafkaConfig, logLevel, type SASLOptions } from 'kafkajs';
import type { StreamConfig } from '../../resources/peer.ts';

const mechanisms = {
  PLAIN: 'plain',
  'SCRAM-SHA-256': 'scram-sha-256',
  'SCRAM-SHA-512': 'scram-sha-512',
} as const;

/**
 * kafkajs's `ssl` option: `false` without TLS; with TLS, the peer's root CA
 * replaces the system's CAs and its client certificate is presented. Server
 * certificates are always verified (Node's default, never turned off here).
 */
export function streamTlsOptions(config: StreamConfig): false | true | ConnectionOptions {
  if (config.disableTls) return false;
  if (!config.rootCa && !config.certificate) return true;
  return {
    ...(config.rootCa ? { ca: config.rootCa } : {}),
    ...(config.certificate && config.privateKey ? { cert: config.certificate, key: config.privateKey } : {}),
  };
}

export function createStreamClient(
  config: StreamConfig,
  options: { clientId: string; timeoutMs?: number },
): Kafka {
  const sasl =
    config.username === '' || config.sasl === ''
      ? undefined
      : ({
          mechanism: mechanisms[config.sasl],
          username: config.username,
          password: config.password,
        } as SASLOptions);
  const kafkaConfig: KafkaConfig = {
    clientId: options.clientId,
    brokers: [...config.servers],
    ssl: streamTlsOptions(config),
    ...(sasl ? { sasl } : {}),
    connectionTimeout: options.timeoutMs ?? 10_000,
    authenticationTimeout: options.timeoutMs ?? 10_000,
    retry: { retries: 1 },
    logLevel: logLevel.NOTHING,
  };
  return new Kafka(kafkaConfig);
}

const zstd = promisify(zstdCompress);
const unzstd = promisify(zstdDecompress);

// kafkajs ships gzip only; Node's zlib has zstd, so the codec needs no native
// package. Registered once for the process: producers compress with it and
// consumers (the checkpoint reader, tests) decompress what others wrote with it.
kafkajs.CompressionCodecs[kafkajs.CompressionTypes.ZSTD] = () => ({
  compress: (encoder: { buffer: Buffer }) => zstd(encoder.buffer),
  decompress: (buffer: Buffer) => unzstd(buffer),
});

/** kafkajs's compression type of the peer's `compression`. */
export function compressionType(config: StreamConfig): CompressionTypes {
  switch (config.compression) {
    case 'gzip':
      return kafkajs.CompressionTypes.GZIP;
    case 'zstd':
      return kafkajs.CompressionTypes.ZSTD;
    default:
      return kafkajs.CompressionTypes.None;
  }
}

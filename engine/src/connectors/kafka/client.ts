// Clients of a stream peer: kafkajs for topics, metadata and the checkpoint
// reader, @platformatic/kafka for producing (twice the messages per second for
// half the CPU; docs/benchmarks.md, "Kafka producers"). A fresh `sasl` object
// per kafkajs client: kafkajs keeps its authenticator on the object it is
// given, so a reused one logs in with stale credentials.
//
// Both drivers are loaded on first use: together they add about 80 MiB of
// resident memory, which a process without a stream peer (standalone mode
// with only PostgreSQL mirrors) should not pay (docs/startup.md, Memory).
import type { ConnectionOptions } from 'node:tls';
import type { Producer } from '@platformatic/kafka';
import type { Kafka, KafkaConfig, SASLOptions } from 'kafkajs';
import type { StreamConfig } from '../../resources/peer.ts';

let kafkajs: Promise<typeof import('kafkajs')> | undefined;
let platformaticKafka: Promise<typeof import('@platformatic/kafka')> | undefined;

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

/** A kafkajs client (not connected: kafkajs connects its admin and consumers on `connect()`). */
export async function createStreamClient(
  config: StreamConfig,
  options: { clientId: string; timeoutMs?: number },
): Promise<Kafka> {
  kafkajs ??= import('kafkajs');
  const { Kafka, logLevel } = await kafkajs;
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

/**
 * The producer of a stream peer's messages: @platformatic/kafka, idempotent
 * with acks=all (it then keeps one request in flight per broker, so a retried
 * request neither doubles nor reorders a partition's messages). Keys, values
 * and header values are Buffers. Same TLS and SASL as `createStreamClient`.
 * No compression here: each send names its own (checkpoints stay uncompressed,
 * so any reader decodes them).
 */
export async function createStreamProducer(
  config: StreamConfig,
  options: { clientId: string; timeoutMs?: number; requestTimeoutMs: number },
): Promise<Producer<Buffer, Buffer, Buffer, Buffer>> {
  platformaticKafka ??= import('@platformatic/kafka');
  const { ProduceAcks, Producer } = await platformaticKafka;
  const tls = streamTlsOptions(config);
  return new Producer({
    clientId: options.clientId,
    bootstrapBrokers: [...config.servers],
    ...(tls === false ? {} : { tls: tls === true ? {} : tls }),
    ...(config.username === '' || config.sasl === ''
      ? {}
      : { sasl: { mechanism: config.sasl, username: config.username, password: config.password } }),
    connectTimeout: options.timeoutMs ?? 10_000,
    requestTimeout: options.requestTimeoutMs,
    timeout: options.requestTimeoutMs,
    idempotent: true,
    acks: ProduceAcks.ALL,
    autocreateTopics: false,
    retries: 5,
    retryDelay: 300,
  });
}

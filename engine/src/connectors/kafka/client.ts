// kafkajs for a stream peer. A fresh `sasl` object per client: kafkajs keeps its
// authenticator on the object it is given, so a reused one logs in with stale
// credentials.
import { Kafka, type KafkaConfig, logLevel, type SASLOptions } from 'kafkajs';
import type { StreamConfig } from '../../resources/peer.ts';

const mechanisms = {
  PLAIN: 'plain',
  'SCRAM-SHA-256': 'scram-sha-256',
  'SCRAM-SHA-512': 'scram-sha-512',
} as const;

export function createStreamClient(
  config: StreamConfig,
  options: { clientId: string; timeoutMs?: number },
): Kafka {
  const sasl = {
    mechanism: mechanisms[config.sasl],
    username: config.username,
    password: config.password,
  } as SASLOptions;
  const kafkaConfig: KafkaConfig = {
    clientId: options.clientId,
    brokers: [...config.servers],
    ssl: !config.disableTls,
    sasl,
    connectionTimeout: options.timeoutMs ?? 10_000,
    authenticationTimeout: options.timeoutMs ?? 10_000,
    retry: { retries: 1 },
    logLevel: logLevel.NOTHING,
  };
  return new Kafka(kafkaConfig);
}

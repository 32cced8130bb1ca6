import { randomUUID } from 'node:crypto';
import type { KafkaConfig, SASLOptions } from 'kafkajs';
import kafkajs from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { kafka } from '../support/testenv.ts';

const { Kafka, Partitioners, logLevel, KafkaJSSASLAuthenticationError } = kafkajs;

/** The mechanisms the SASL_PLAINTEXT listener enables: all username/password ones. */
type PasswordSasl = Extract<SASLOptions, { mechanism: 'plain' | 'scram-sha-256' | 'scram-sha-512' }>;

interface Listener {
  readonly name: string;
  readonly broker: string;
  readonly sasl?: PasswordSasl;
}

const listeners: readonly Listener[] = [
  { name: 'PLAINTEXT', broker: kafka.plaintextBroker },
  { name: 'SASL PLAIN', broker: kafka.saslBroker, sasl: { mechanism: 'plain', ...kafka.plain } },
  {
    name: 'SASL SCRAM-SHA-256',
    broker: kafka.saslBroker,
    sasl: { mechanism: 'scram-sha-256', ...kafka.scram },
  },
  {
    name: 'SASL SCRAM-SHA-512',
    broker: kafka.saslBroker,
    sasl: { mechanism: 'scram-sha-512', ...kafka.scram },
  },
];

/**
 * A fresh SASL object for every client: kafkajs caches its authenticator, bound to the
 * password, on the very object it is given (`sasl.authenticationProvider`), so reusing or
 * spreading a used object would authenticate with the old password.
 */
function freshSasl(sasl: PasswordSasl, password = sasl.password): PasswordSasl {
  return { mechanism: sasl.mechanism, username: sasl.username, password };
}

function client(listener: Listener, extra: Partial<KafkaConfig> = {}): InstanceType<typeof Kafka> {
  return new Kafka({
    clientId: 'tributary-smoke',
    brokers: [listener.broker],
    ...(listener.sasl ? { sasl: freshSasl(listener.sasl) } : {}),
    connectionTimeout: 5_000,
    requestTimeout: 15_000,
    logLevel: logLevel.ERROR,
    ...extra,
  });
}

/** Rejects when `promise` has not settled within `ms`; the timer never outlives it. */
async function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

interface Received {
  readonly key: string | undefined;
  readonly value: string | undefined;
  readonly offset: string;
}

describe('Kafka test broker', () => {
  it.each(listeners)('creates, produces and consumes over $name', async (listener) => {
    const label = listener.name.toLowerCase().replaceAll(/[^a-z0-9]+/g, '-');
    const topic = `smoke-${label}-${randomUUID().slice(0, 8)}`;
    const broker = client(listener);
    const admin = broker.admin();
    await admin.connect();
    try {
      const created = await admin.createTopics({
        topics: [{ topic, numPartitions: 1, replicationFactor: 1 }],
        waitForLeaders: true,
        timeout: 15_000,
      });
      expect(created).toBe(true);
      expect(await admin.listTopics()).toContain(topic);

      const sent = Array.from({ length: 5 }, (_, i) => ({
        key: `key-${i}`,
        value: JSON.stringify({ n: i, via: listener.name }),
      }));
      const producer = broker.producer({
        idempotent: true,
        maxInFlightRequests: 1,
        createPartitioner: Partitioners.DefaultPartitioner,
      });
      await producer.connect();
      try {
        const results = await producer.send({ topic, acks: -1, messages: sent });
        expect(results).toHaveLength(1);
        expect(results[0]?.errorCode).toBe(0);
      } finally {
        await producer.disconnect();
      }

      const received: Received[] = [];
      let allArrived: () => void = () => {};
      const arrived = new Promise<void>((resolve) => {
        allArrived = resolve;
      });
      const consumer = broker.consumer({ groupId: `${topic}-group`, sessionTimeout: 10_000 });
      await consumer.connect();
      try {
        await consumer.subscribe({ topics: [topic], fromBeginning: true });
        await consumer.run({
          eachMessage: async ({ message }) => {
            received.push({
              key: message.key?.toString(),
              value: message.value?.toString(),
              offset: message.offset,
            });
            if (received.length >= sent.length) allArrived();
          },
        });
        await within(60_000, `consuming ${sent.length} messages from ${topic}`, arrived);
      } finally {
        await consumer.disconnect();
      }

      expect(received).toEqual(sent.map((message, i) => ({ ...message, offset: String(i) })));
    } finally {
      await admin.deleteTopics({ topics: [topic], timeout: 10_000 });
      await admin.disconnect();
    }
  });

  it.each(listeners.filter((listener) => listener.sasl))(
    'refuses a wrong password over $name',
    async (listener) => {
      if (!listener.sasl) throw new Error('unreachable: filtered to SASL listeners');
      const wrong: Listener = {
        ...listener,
        sasl: freshSasl(listener.sasl, 'not-the-password'),
      };
      const admin = client(wrong, { logLevel: logLevel.NOTHING, retry: { retries: 0 } }).admin();
      try {
        const attempt = admin.connect();
        await expect(attempt).rejects.toBeInstanceOf(KafkaJSSASLAuthenticationError);
        await expect(attempt).rejects.toThrow(/authentication failed/i);
      } finally {
        await admin.disconnect();
      }
    },
  );
});

// Helpers for the Kafka destination suites: clients for each listener of the
// test broker, throw-away topics, and a consumer that collects what arrives.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { zstdCompress, zstdDecompress } from 'node:zlib';
import kafkajs, { type Consumer, type Kafka, type KafkaConfig, type SASLOptions } from 'kafkajs';
import type { StreamConfig } from '../../engine/src/resources/peer.ts';
import { waitFor } from '../support/databases.ts';
import { kafka, testenvDir } from '../support/testenv.ts';

// kafkajs reads gzip only; the destination may write zstd (`compression`), which
// Node's zlib decodes: registered once for the test consumers.
const zstd = promisify(zstdCompress);
const unzstd = promisify(zstdDecompress);
kafkajs.CompressionCodecs[kafkajs.CompressionTypes.ZSTD] = () => ({
  compress: (encoder: { buffer: Buffer }) => zstd(encoder.buffer),
  decompress: (buffer: Buffer) => unzstd(buffer),
});

export type Listener = 'PLAINTEXT' | 'PLAIN' | 'SCRAM-SHA-256' | 'SCRAM-SHA-512';

/** A stream peer's config for a listener (PLAINTEXT: no SASL). */
export function streamConfig(
  listener: Listener,
  partitioner: StreamConfig['partitioner'] = '',
): StreamConfig {
  const common = { disableTls: true, partitioner, compression: 'none' } as const;
  if (listener === 'PLAINTEXT') {
    return { servers: [kafka.plaintextBroker], username: '', password: '', sasl: '', ...common };
  }
  const credentials = listener === 'PLAIN' ? kafka.plain : kafka.scram;
  return { servers: [kafka.saslBroker], ...credentials, sasl: listener, ...common };
}

/** A client for a listener; a fresh SASL object every time (kafkajs caches its authenticator on it). */
export function kafkaClient(listener: Listener, extra: Partial<KafkaConfig> = {}): Kafka {
  const mechanisms = {
    PLAIN: 'plain',
    'SCRAM-SHA-256': 'scram-sha-256',
    'SCRAM-SHA-512': 'scram-sha-512',
  } as const;
  const config = streamConfig(listener);
  return new kafkajs.Kafka({
    clientId: 'tributary-test',
    brokers: [...config.servers],
    ...(listener === 'PLAINTEXT'
      ? {}
      : {
          sasl: {
            mechanism: mechanisms[listener],
            username: config.username,
            password: config.password,
          } as SASLOptions,
        }),
    connectionTimeout: 5_000,
    requestTimeout: 15_000,
    retry: { retries: 3 },
    logLevel: kafkajs.logLevel.NOTHING,
    ...extra,
  });
}

export function randomTopic(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

export async function createTopics(
  client: Kafka,
  topics: readonly string[],
  partitions: number,
): Promise<void> {
  const admin = client.admin();
  await admin.connect();
  try {
    await admin.createTopics({
      topics: topics.map((topic) => ({ topic, numPartitions: partitions, replicationFactor: 1 })),
      waitForLeaders: true,
      timeout: 15_000,
    });
  } finally {
    await admin.disconnect();
  }
}

export async function deleteTopics(client: Kafka, topics: readonly string[]): Promise<void> {
  const admin = client.admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    const present = topics.filter((topic) => existing.has(topic));
    if (present.length > 0) await admin.deleteTopics({ topics: present, timeout: 15_000 });
  } finally {
    await admin.disconnect();
  }
}

export interface Received {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  readonly key: string | null;
  readonly value: string | null;
  readonly headers: Readonly<Record<string, string>>;
}

/** Collects every message of some topics from their start, in arrival order per partition. */
export class TopicCollector {
  readonly messages: Received[] = [];
  readonly #client: Kafka;
  readonly #groupId = `tributary-test-${randomUUID()}`;
  #consumer: Consumer | undefined;

  constructor(client: Kafka) {
    this.#client = client;
  }

  /**
   * Subscribes from the beginning and resolves once the consumer joined its
   * group. A join that does not come within 20 s (seen once on a broker still
   * creating __consumer_offsets) is retried with a new consumer, three times in
   * all, so a test never waits on it without bound.
   */
  async start(topics: readonly string[]): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#startOnce(topics, 20_000);
        return;
      } catch (error) {
        await this.#consumer?.disconnect().catch(() => {});
        if (attempt >= 3) throw error;
      }
    }
  }

  async #startOnce(topics: readonly string[], joinTimeoutMs: number): Promise<void> {
    const consumer = this.#client.consumer({
      groupId: this.#groupId,
      allowAutoTopicCreation: false,
      maxWaitTimeInMs: 100,
      sessionTimeout: 10_000,
    });
    this.#consumer = consumer;
    await consumer.connect();
    await consumer.subscribe({ topics: [...topics], fromBeginning: true });
    let timer: NodeJS.Timeout | undefined;
    const joined = new Promise<void>((resolve, reject) => {
      consumer.on(consumer.events.GROUP_JOIN, () => resolve());
      consumer.on(consumer.events.CRASH, (event) => {
        if (!event.payload.restart) reject(event.payload.error);
      });
      timer = setTimeout(
        () => reject(new Error(`consumer did not join its group within ${joinTimeoutMs} ms`)),
        joinTimeoutMs,
      );
    });
    try {
      await consumer.run({
        eachMessage: async ({ topic, partition, message }) => {
          const headers: Record<string, string> = {};
          for (const [name, value] of Object.entries(message.headers ?? {})) headers[name] = String(value);
          this.messages.push({
            topic,
            partition,
            offset: Number(message.offset),
            key: message.key ? message.key.toString() : null,
            value: message.value ? message.value.toString() : null,
            headers,
          });
        },
      });
      await joined;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Waits until `check` holds over the messages received so far. */
  async until(
    check: (messages: readonly Received[]) => boolean,
    timeoutMs = 30_000,
    what = 'messages',
  ): Promise<void> {
    await waitFor(async () => check(this.messages), timeoutMs, what);
  }

  async untilCount(count: number, timeoutMs = 30_000): Promise<void> {
    await this.until((messages) => messages.length >= count, timeoutMs, `${count} messages`);
  }

  async stop(): Promise<void> {
    await this.#consumer?.disconnect().catch(() => {});
    const admin = this.#client.admin();
    await admin.connect();
    await admin.deleteGroups([this.#groupId]).catch(() => {});
    await admin.disconnect();
  }
}

/** A record batch of a partition's log as the broker stored it, read by Kafka's own tool. */
export interface StoredBatch {
  /** The codec its attributes name: none, gzip, snappy, lz4 or zstd. */
  readonly codec: string;
  /** Its records, decompressed by Kafka's own (Java) codecs. */
  readonly records: readonly { readonly key: string; readonly payload: string }[];
}

/**
 * The record batches of a test topic's partition as the broker wrote them to
 * disk, read by Kafka's `DumpLogSegments` with the broker's own java and jars
 * (found on its command line): a check of what was stored that does not go
 * through the client that wrote it. Its output has a line per batch
 * (`… compresscodec: lz4 …`), then a line per record (`| offset: … key: … payload: …`).
 */
export async function storedBatches(topic: string, partition: number): Promise<StoredBatch[]> {
  const pid = readFileSync(join(testenvDir, 'kafka', 'kafka.pid'), 'utf8').trim();
  const command = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  const classpathAt = command.indexOf('-cp') + 1;
  const classpath = classpathAt > 0 ? command[classpathAt] : undefined;
  if (!command[0] || !classpath)
    throw new Error(`the broker's command line names no java or -cp: ${command.join(' ')}`);
  const segment = join(testenvDir, 'kafka', 'data', `${topic}-${partition}`, '00000000000000000000.log');
  const { stdout: output } = await promisify(execFile)(
    command[0],
    ['-cp', classpath, 'kafka.tools.DumpLogSegments', '--files', segment, '--print-data-log'],
    { encoding: 'utf8', timeout: 60_000, maxBuffer: 64 * 1024 * 1024 },
  );
  const batches: { codec: string; records: { key: string; payload: string }[] }[] = [];
  for (const line of output.split('\n')) {
    const codec = / compresscodec: (\w+)/.exec(line);
    if (codec?.[1] && line.startsWith('baseOffset:')) {
      batches.push({ codec: codec[1].toLowerCase(), records: [] });
      continue;
    }
    const record = /^\| offset: .* key: (.*) payload: (.*)$/.exec(line);
    if (record) {
      const batch = batches.at(-1);
      if (!batch) throw new Error(`a record before any batch in DumpLogSegments' output: ${line}`);
      batch.records.push({ key: record[1] as string, payload: record[2] as string });
    }
  }
  return batches;
}

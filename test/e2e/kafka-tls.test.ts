// Kafka over TLS, on the second broker of scripts/testenv/kafka-tls.sh: the
// peer check with the peer's root CA (SASL over TLS, and a client certificate
// alone), the refusals when the CA or the client certificate does not match,
// and a mirror whose destination is reached with a client certificate.
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import kafkajs from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkPeer, describeCheckFailure } from '../../engine/src/connectors/peer-check.ts';
import { type Peer, peerSchema, type StreamConfig } from '../../engine/src/resources/peer.ts';
import { deleteTopics, randomTopic, TopicCollector } from '../integration/kafka-support.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import { exited, startEngine, writeEngineConfig } from '../support/engine-process.ts';
import { createHarness, type Harness, mapping } from '../support/mirror-harness.ts';
import { kafka } from '../support/testenv.ts';

const pem = (file: string) => readFileSync(join(kafka.tls.tlsDir, file), 'utf8');

const saslOverTls = (overrides: Partial<StreamConfig> = {}): Peer =>
  peerSchema.parse({
    name: 'events',
    kind: 'stream',
    config: {
      servers: [kafka.tls.saslBroker],
      ...kafka.plain,
      sasl: 'PLAIN',
      rootCa: pem('ca.crt'),
      ...overrides,
    },
  });

const mutualTls = (overrides: Partial<StreamConfig> = {}): Peer =>
  peerSchema.parse({
    name: 'events',
    kind: 'stream',
    config: {
      servers: [kafka.tls.mutualBroker],
      rootCa: pem('ca.crt'),
      certificate: pem('client.crt'),
      privateKey: pem('client.key'),
      ...overrides,
    },
  });

const failureOf = async (peer: Peer) =>
  checkPeer(peer, 10_000).then(
    () => 'connected',
    (error: unknown) => describeCheckFailure(error, [kafka.plain.password, pem('client.key')]),
  );

describe('Kafka over TLS', () => {
  // A consumer on the mutual-TLS listener, as any client of such a cluster.
  const client = new kafkajs.Kafka({
    clientId: 'tributary-test',
    brokers: [kafka.tls.mutualBroker],
    ssl: { ca: pem('ca.crt'), cert: pem('client.crt'), key: pem('client.key') },
    connectionTimeout: 5_000,
    requestTimeout: 15_000,
    retry: { retries: 3 },
    logLevel: kafkajs.logLevel.NOTHING,
  });
  const topics: string[] = [];
  let harness: Harness;
  let engine: ChildProcess | undefined;

  beforeAll(async () => {
    harness = await createHarness('ktls');
  });

  afterAll(async () => {
    if (engine) {
      engine.kill('SIGTERM');
      await exited(engine);
    }
    await deleteTopics(client, topics).catch(() => {});
    await harness?.close();
  });

  it('connects with the peer root CA, over SASL and with a client certificate alone', async () => {
    expect(await checkPeer(saslOverTls())).toEqual({});
    expect(await checkPeer(mutualTls())).toEqual({});
  });

  it('refuses a broker it cannot verify, and says which field to set', async () => {
    // No root CA: the system's CAs do not know the test CA.
    const unverified = await failureOf(saslOverTls({ rootCa: undefined }));
    expect(unverified).toMatch(/certificate is not trusted .*set rootCa/);
    const foreign = await failureOf(saslOverTls({ rootCa: pem('foreign-ca.crt') }));
    expect(foreign).toMatch(/certificate is not trusted .*set rootCa/);
    for (const message of [unverified, foreign]) expect(message).not.toContain(kafka.plain.password);
  });

  it('is refused without a client certificate the broker trusts', async () => {
    const without = peerSchema.parse({
      name: 'events',
      kind: 'stream',
      config: { servers: [kafka.tls.mutualBroker], rootCa: pem('ca.crt') },
    });
    expect(await failureOf(without)).toMatch(/refused the client certificate/);
    const stranger = await failureOf(
      mutualTls({ certificate: pem('foreign-client.crt'), privateKey: pem('foreign-client.key') }),
    );
    expect(stranger).toMatch(/refused the client certificate/);
    expect(stranger).not.toContain('PRIVATE KEY');
  });

  it('runs a mirror whose destination is reached over mutual TLS, and delivers the source rows', async () => {
    await harness.source.client.query(`CREATE TABLE readings (id int PRIMARY KEY, value text)`);
    await harness.source.client.query(
      `INSERT INTO readings SELECT g, 'v' || g FROM generate_series(1, 200) g`,
    );
    const topic = randomTopic('readings');
    topics.push(topic);
    const mirror = `ktls-${randomSuffix()}`;
    const configPath = writeEngineConfig(
      harness,
      {
        name: mirror,
        sourcePeer: 'source',
        destinationPeer: 'events',
        tableMappings: [{ ...mapping('readings'), destination: { schema: 'public', table: topic } }],
        doInitialSnapshot: true,
        idleTimeoutSeconds: 1,
      },
      { destination: mutualTls() },
    );
    engine = startEngine(mirror, configPath);
    const collector = new TopicCollector(client);
    try {
      // The topic is created by the engine's first write; subscribe once it exists.
      const admin = client.admin();
      await admin.connect();
      try {
        await waitFor(async () => (await admin.listTopics()).includes(topic), 60_000, 'topic created');
      } finally {
        await admin.disconnect();
      }
      await collector.start([topic]);
      await collector.untilCount(200, 60_000);
      await harness.source.client.query(`INSERT INTO readings VALUES (201, 'after')`);
      await harness.source.client.query(`UPDATE readings SET value = 'changed' WHERE id = 7`);
      await collector.untilCount(202, 60_000);

      // What arrived is what the source holds: each id's last message carries its row.
      const latest = new Map<number, string>();
      for (const message of collector.messages) {
        const value = JSON.parse(message.value ?? 'null');
        latest.set(Number(value.new.id), value.new.value);
      }
      const { rows } = await harness.source.client.query<{ id: number; value: string }>(
        'SELECT id, value FROM readings ORDER BY id',
      );
      expect([...latest.entries()].sort(([a], [b]) => a - b)).toEqual(rows.map((row) => [row.id, row.value]));
    } finally {
      await collector.stop();
    }
    // Above the sum of its bounded waits, so a slow step fails with its own message.
  }, 300_000);
});

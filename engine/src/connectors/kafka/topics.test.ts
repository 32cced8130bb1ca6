import { describe, expect, it } from 'vitest';
import { peerSchema } from '../../resources/peer.ts';
import { defaultTopicName, topicNameProblem } from './topics.ts';

describe('topic names', () => {
  it('maps a destination identifier to its default topic', () => {
    expect(defaultTopicName({ schema: 'public', table: 'orders' })).toBe('orders');
    expect(defaultTopicName({ schema: 'sales', table: 'orders' })).toBe('sales.orders');
  });

  it('applies Kafka rules', () => {
    expect(topicNameProblem('orders_v2.events-1')).toBeUndefined();
    expect(topicNameProblem('a'.repeat(249))).toBeUndefined();
    for (const bad of ['', '.', '..', 'with space', 'ümlaut', 'a/b', 'a'.repeat(250)]) {
      expect(topicNameProblem(bad)).toBeDefined();
    }
  });

  it("refuses internal topics: the checkpoint topic and Kafka's own", () => {
    expect(topicNameProblem('_tributary_checkpoints')).toContain("holds the mirrors' checkpoints");
    expect(topicNameProblem('__consumer_offsets')).toContain('internal to Kafka');
    expect(topicNameProblem('__transaction_state')).toContain('internal to Kafka');
    // Names that only look alike are topics like any other.
    expect(topicNameProblem('_tributary_checkpoints_v2')).toBeUndefined();
    expect(topicNameProblem('_private')).toBeUndefined();
  });
});

describe('stream peer validation', () => {
  const valid = { servers: ['broker-1:9092'], username: 'u', password: 'p', sasl: 'SCRAM-SHA-512' };
  const issues = (config: Record<string, unknown>) => {
    const result = peerSchema.safeParse({ name: 'kafka', kind: 'stream', config });
    return result.success
      ? []
      : result.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
  };

  it('accepts every mechanism and partitioner, with TLS on by default', () => {
    const parsed = peerSchema.parse({ name: 'kafka', kind: 'stream', config: valid });
    expect(parsed.config).toMatchObject({ disableTls: false, partitioner: '' });
    for (const sasl of ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'])
      expect(issues({ ...valid, sasl })).toEqual([]);
    for (const partitioner of ['', 'LeastBackup', 'Manual', 'RoundRobin', 'StickyKey', 'Sticky']) {
      expect(issues({ ...valid, partitioner })).toEqual([]);
    }
  });

  it('refuses an unknown mechanism, a bad server address and an unknown partitioner', () => {
    expect(issues({ ...valid, sasl: 'GSSAPI' })).toEqual([
      expect.stringMatching(
        /^config\.sasl: Invalid option: expected one of ""\|"PLAIN"\|"SCRAM-SHA-256"\|"SCRAM-SHA-512"/,
      ),
    ]);
    for (const server of ['broker-1', 'broker 1:9092', 'broker-1:port', 'broker-1:123456', '']) {
      expect(issues({ ...valid, servers: [server] })).toEqual([
        expect.stringMatching(/^config\.servers\.0: expected host:port/),
      ]);
    }
    expect(issues({ ...valid, servers: [] })).toEqual([expect.stringMatching(/^config\.servers: /)]);
    expect(issues({ ...valid, partitioner: 'Random' })).toEqual([
      expect.stringMatching(/^config\.partitioner: /),
    ]);
  });

  it('takes a client certificate without SASL, and refuses half a key pair or TLS fields without TLS', () => {
    const { username: _, password: __, sasl: ___, ...servers } = valid;
    const pair = { certificate: 'CERT', privateKey: 'KEY', rootCa: 'CA' };
    expect(issues({ ...servers, ...pair })).toEqual([]);
    expect(issues({ ...valid, sasl: '' })).toEqual([
      expect.stringMatching(/^config\.sasl: a username needs a SASL mechanism/),
    ]);
    expect(issues({ ...servers, certificate: 'CERT' })).toEqual([
      expect.stringMatching(/^config\.certificate: a client certificate needs its private key/),
    ]);
    expect(issues({ ...servers, ...pair, disableTls: true })).toEqual([
      expect.stringMatching(/^config\.disableTls: certificate and root CA need TLS/),
    ]);
  });
});

// kafkajs is the reference here: '' means its default partitioner (docs/kafka.md).
import kafkajs, { type PartitionMetadata as KafkaJsPartition } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { EngineError } from '../../errors.ts';
import { keyPartition, murmur2, PartitionStrategy, type TopicPartitions } from './partitioners.ts';

/** A topic's partitions as kafkajs's partitioners take them; a superset of what the destination reads. */
const topic = (count: number): TopicPartitions & { partitions: KafkaJsPartition[] } => ({
  topic: 't',
  partitions: Array.from({ length: count }, (_, partitionId) => ({
    partitionId,
    leader: 1,
    replicas: [1],
    isr: [1],
    partitionErrorCode: 0,
    offlineReplicas: [],
  })) as KafkaJsPartition[],
});
const four = topic(4);
const key = (text: string) => Buffer.from(text);

describe('partitioners', () => {
  it('hashes keys as the Java client and kafkajs do', () => {
    // Reference values of org.apache.kafka.common.utils.Utils#murmur2.
    expect(murmur2(Buffer.from('21'))).toBe(-973932308);
    expect(murmur2(Buffer.from('foobar'))).toBe(-790332482);
    expect(murmur2(Buffer.from('a-little-bit-long-string'))).toBe(-985981536);
    expect(murmur2(Buffer.from(''))).toBe(275646681);
    const javaCompatible = kafkajs.Partitioners.DefaultPartitioner();
    for (let i = 0; i < 500; i++) {
      const k = `{"id":"${i}"}`;
      expect(keyPartition(key(k), 7)).toBe(
        javaCompatible({
          topic: 't',
          partitionMetadata: [...topic(7).partitions],
          message: { key: k, value: null },
        }),
      );
    }
  });

  it('RoundRobin rotates strictly', () => {
    const assigner = new PartitionStrategy('RoundRobin').batch();
    expect(Array.from({ length: 9 }, () => assigner.assign(four, key('same'), undefined))).toEqual([
      0, 1, 2, 3, 0, 1, 2, 3, 0,
    ]);
  });

  it('Sticky keeps one partition per batch and moves on with the next batch', () => {
    const strategy = new PartitionStrategy('Sticky');
    const used = Array.from({ length: 4 }, () => {
      const assigner = strategy.batch();
      const partitions = new Set(
        Array.from({ length: 20 }, (_, i) => assigner.assign(four, key(String(i)), 3)),
      );
      expect(partitions.size).toBe(1);
      return [...partitions][0];
    });
    expect(new Set(used).size).toBe(4);
  });

  it('StickyKey hashes keys and keeps key-less messages together per batch', () => {
    const assigner = new PartitionStrategy('StickyKey').batch();
    expect(assigner.assign(four, key('abc'), undefined)).toBe(keyPartition(key('abc'), 4));
    const keyless = new Set(Array.from({ length: 10 }, () => assigner.assign(four, null, undefined)));
    expect(keyless.size).toBe(1);
  });

  it('LeastBackup picks the partition with the fewest messages in flight', () => {
    const strategy = new PartitionStrategy('LeastBackup');
    const assigner = strategy.batch();
    const first = Array.from({ length: 8 }, () => assigner.assign(four, null, undefined));
    expect(first.filter((p) => p === 0)).toHaveLength(2);
    for (let p = 0; p < 4; p++) expect(first.filter((q) => q === p)).toHaveLength(2);
    // Partition 2 is acknowledged: it is now the least backed up.
    strategy.settled('t', 2, 2);
    expect(assigner.assign(four, null, undefined)).toBe(2);
    expect(assigner.assign(four, null, undefined)).toBe(2);
  });

  it('Manual takes the script partition, 0 without one, and refuses a missing partition', () => {
    const assigner = new PartitionStrategy('Manual').batch();
    expect(assigner.assign(four, key('x'), 3)).toBe(3);
    expect(assigner.assign(four, key('x'), undefined)).toBe(0);
    expect(() => assigner.assign(four, key('x'), 4)).toThrow(EngineError);
    expect(() => assigner.assign(four, key('x'), 4)).toThrow(/partition 4 of topic t, which has 4 partition/);
  });

  it("'' is kafkajs's default partitioner", () => {
    const assigner = new PartitionStrategy('').batch();
    expect(assigner.assign(four, key('abc'), 2)).toBe(keyPartition(key('abc'), 4));
    const keyless = Array.from({ length: 8 }, () => assigner.assign(four, null, undefined));
    expect(new Set(keyless).size).toBe(4);
  });

  it("'' without a key goes round the partitions with a leader in kafkajs's order", () => {
    // Partitions 1 and 3 have no leader; kafkajs's counter starts at random,
    // so both sequences are compared from where each starts.
    const partitions: KafkaJsPartition[] = (four.partitions as KafkaJsPartition[]).map((metadata) => ({
      ...metadata,
      leader: metadata.partitionId % 2 === 1 ? -1 : 1,
    }));
    const led = { topic: 't', partitions };
    const kafkajsDefault = kafkajs.Partitioners.DefaultPartitioner();
    const expected = Array.from({ length: 6 }, () =>
      kafkajsDefault({ topic: 't', partitionMetadata: partitions, message: { key: null, value: null } }),
    );
    const assigner = new PartitionStrategy('').batch();
    const actual = Array.from({ length: 6 }, () => assigner.assign(led, null, undefined));
    const fromZero = (sequence: number[]) => sequence.slice(sequence.indexOf(0), sequence.indexOf(0) + 4);
    expect(fromZero(actual)).toEqual([0, 2, 0, 2]);
    expect(fromZero(actual)).toEqual(fromZero(expected));
  });
});

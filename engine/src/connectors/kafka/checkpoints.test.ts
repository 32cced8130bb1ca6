import type { Producer } from '@platformatic/kafka';
import { describe, expect, it } from 'vitest';
import { deleteCheckpoint, scanCheckpointBatches, writeCheckpoint } from './checkpoints.ts';
import { checkpointTopic } from './topics.ts';

/** A producer that records what it was asked to send. */
function recordingProducer() {
  const sent: unknown[] = [];
  const producer = {
    send: async (options: unknown) => {
      sent.push(options);
      return {};
    },
  } as unknown as Producer<Buffer, Buffer, Buffer, Buffer>;
  return { producer, sent };
}

describe('checkpoint messages', () => {
  // Every reader must decode them, whatever codec the peer compresses its data with.
  it('are written uncompressed, keyed by the mirror, to partition 0 of the checkpoint topic', async () => {
    const { producer, sent } = recordingProducer();
    await writeCheckpoint(producer, 'm1', { batchId: 7n, lsn: 0x1000n });
    await deleteCheckpoint(producer, 'm1');
    expect(sent).toHaveLength(2);
    for (const options of sent) {
      expect(options).toMatchObject({
        compression: 'none',
        messages: [{ topic: checkpointTopic, key: Buffer.from('m1'), partition: 0 }],
      });
    }
    const [written, deleted] = sent as { messages: { value: Buffer | null }[] }[];
    expect(JSON.parse(String(written?.messages[0]?.value))).toMatchObject({ batch_id: '7', lsn: '4096' });
    expect(deleted?.messages[0]?.value).toBeNull();
  });
});

describe('scanCheckpointBatches', () => {
  const record = (offsetDelta: number, key: string | null, value: string | null) => ({
    offsetDelta,
    key: key === null ? null : Buffer.from(key),
    value: value === null ? null : Buffer.from(value),
  });

  it("keeps the mirror's last value below the end, skipping what was read before", () => {
    const batches = [
      // A fetch from offset 11 gets the whole batch that holds it, from 10.
      {
        firstOffset: 10n,
        lastOffsetDelta: 2,
        records: [record(0, 'm1', 'a'), record(1, 'm2', 'b'), record(2, 'm1', 'c')],
      },
      {
        firstOffset: 13n,
        lastOffsetDelta: 1,
        records: [record(0, 'm1', 'd'), record(1, 'm1', 'past-the-end')],
      },
    ];
    const scan = scanCheckpointBatches(batches, 'm1', 14n, { last: undefined, nextOffset: 11n });
    expect(scan.last?.toString()).toBe('d');
    expect(scan.nextOffset).toBe(15n);
    // Offset 10 was read before this fetch: its value does not come back.
    const fromTwelve = scanCheckpointBatches(batches.slice(0, 1), 'm1', 14n, {
      last: undefined,
      nextOffset: 12n,
    });
    expect(fromTwelve.last?.toString()).toBe('c');
  });

  it('reads a tombstone as null, and moves past gaps compaction left', () => {
    // Compaction removed offsets 21 to 28; the batch still ends at 29.
    const batches = [
      { firstOffset: 20n, lastOffsetDelta: 9, records: [record(0, 'm1', 'a'), record(9, 'm1', null)] },
    ];
    const scan = scanCheckpointBatches(batches, 'm1', 30n, { last: undefined, nextOffset: 20n });
    expect(scan.last).toBeNull();
    expect(scan.nextOffset).toBe(30n);
    const none = scanCheckpointBatches([], 'm1', 30n, { last: Buffer.from('x'), nextOffset: 30n });
    expect([none.last?.toString(), none.nextOffset]).toEqual(['x', 30n]);
  });
});

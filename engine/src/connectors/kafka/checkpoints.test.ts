import type { Producer } from '@platformatic/kafka';
import { describe, expect, it } from 'vitest';
import { deleteCheckpoint, writeCheckpoint } from './checkpoints.ts';
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

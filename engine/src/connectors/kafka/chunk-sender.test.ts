import { describe, expect, it } from 'vitest';
import { ChunkSender, maxChunkMessages, type Outgoing } from './chunk-sender.ts';
import type { BatchAssigner } from './partitioners.ts';

function outgoing(value: string, bytes: number): Outgoing {
  return { topic: 't', key: null, value: Buffer.from(value), headers: undefined, partition: 0, bytes };
}

function values(chunk: readonly Outgoing[]): string[] {
  return chunk.map((message) => String(message.value));
}

/** What the destination does for one record: its messages, then a send when the chunk is full. */
async function add(sender: ChunkSender, messages: readonly Outgoing[]): Promise<void> {
  for (const message of messages) sender.push(message);
  await sender.sendIfFull();
}

/** A send whose acknowledgements the test gives one at a time. */
function heldSends() {
  const sent: string[][] = [];
  const acknowledge: (() => void)[] = [];
  const send = (chunk: readonly Outgoing[]) => {
    sent.push(values(chunk));
    return new Promise<void>((resolve) => acknowledge.push(resolve));
  };
  return { sent, acknowledge, send };
}

const assigner = (): BatchAssigner => ({ assign: () => 0 });

/** A sender whose chunks are acknowledged at once and recorded in `sent`. */
function recordingSender(chunkBytes: number) {
  const sent: string[][] = [];
  const sender = new ChunkSender({
    send: async (chunk) => {
      sent.push(values(chunk));
    },
    chunkBytes,
    newAssigner: assigner,
    assignerPerChunk: false,
  });
  return { sent, sender };
}

describe('ChunkSender', () => {
  it('sends a chunk once its bytes reach the bound, and the rest on finish', async () => {
    const { sent, sender } = recordingSender(100);
    sender.push(outgoing('a', 60));
    expect(sender.sendIfFull()).toBeUndefined();
    expect(sent).toEqual([]);
    await add(sender, [outgoing('b', 40), outgoing('c', 10)]);
    expect(sent).toEqual([['a', 'b', 'c']]);
    await add(sender, [outgoing('d', 10)]);
    await sender.finish();
    expect(sent).toEqual([['a', 'b', 'c'], ['d']]);
  });

  it('bounds a chunk by its message count too', async () => {
    const { sent, sender } = recordingSender(Number.MAX_SAFE_INTEGER);
    for (let index = 0; index < maxChunkMessages; index++) await add(sender, [outgoing(String(index), 1)]);
    expect(sent).toHaveLength(1);
    await sender.finish();
    expect(sent).toHaveLength(1);
  });

  it('sends a chunk only after the one before it was acknowledged', async () => {
    const { sent, acknowledge, send } = heldSends();
    const sender = new ChunkSender({ send, chunkBytes: 1, newAssigner: assigner, assignerPerChunk: false });
    await add(sender, [outgoing('a', 1)]);
    expect(sent).toEqual([['a']]);
    const second = add(sender, [outgoing('b', 1)]);
    await Promise.resolve();
    expect(sent).toEqual([['a']]);
    acknowledge[0]?.();
    await second;
    expect(sent).toEqual([['a'], ['b']]);
    const finished = sender.finish();
    acknowledge[1]?.();
    await finished;
  });

  it('fails finish with the failure of the last chunk', async () => {
    const sender = new ChunkSender({
      send: async () => {
        throw new Error('refused');
      },
      chunkBytes: 10,
      newAssigner: assigner,
      assignerPerChunk: false,
    });
    await add(sender, [outgoing('a', 1)]);
    await expect(sender.finish()).rejects.toThrow('refused');
  });

  it('takes a new assigner per chunk when asked to', async () => {
    for (const assignerPerChunk of [true, false]) {
      const sender = new ChunkSender({
        send: async () => {},
        chunkBytes: 1,
        newAssigner: assigner,
        assignerPerChunk,
      });
      const first = sender.assigner();
      await add(sender, [outgoing('a', 1)]);
      expect(sender.assigner() !== first).toBe(assignerPerChunk);
    }
  });
});

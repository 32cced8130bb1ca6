// Sends a batch's messages in chunks of bounded size, one chunk after the
// other, so that order per partition holds without holding the whole batch.
import type { BatchAssigner } from './partitioners.ts';

// Small requests let the next one be built while the broker handles the
// previous one. bench/kafka-producers.ts: with kafkajs (which groups a request's
// messages per partition in quadratic time) 500 sent ~15% more messages/s than
// 2,000; with @platformatic/kafka 250, 500 and 2,000 were within the noise of
// each other (docs/benchmarks.md, "Kafka producers").
export const maxChunkMessages = 500;

/**
 * A message as the producer takes it (@platformatic/kafka's message shape,
 * handed over as it is): bytes, headers whose names may repeat, its partition
 * chosen, and its size as counted against a chunk's bound.
 */
export interface Outgoing {
  readonly topic: string;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly headers: Map<Buffer, Buffer> | undefined;
  readonly partition: number;
  readonly bytes: number;
}

export interface ChunkSenderOptions {
  /** Sends one chunk; resolves once the broker acknowledged all of it. */
  readonly send: (chunk: readonly Outgoing[]) => Promise<void>;
  /** A chunk is sent once its messages' bytes reach this. */
  readonly chunkBytes: number;
  /** … or once it holds this many messages (default maxChunkMessages). */
  readonly chunkMessages?: number | undefined;
  readonly newAssigner: () => BatchAssigner;
  /** A new assigner per chunk (snapshot partitions: Sticky moves on between chunks). */
  readonly assignerPerChunk: boolean;
}

/**
 * Accumulates messages into chunks and sends each chunk once it is full. One
 * chunk is in flight while the next is built; a chunk is sent only after the
 * one before it was acknowledged, so order per partition holds. `finish`
 * waits for the last acknowledgement.
 *
 * Adding is synchronous (`push`), and `sendIfFull` makes a promise only when
 * a chunk is due: most messages of a batch cost no promise at all.
 */
export class ChunkSender {
  readonly #send: (chunk: readonly Outgoing[]) => Promise<void>;
  readonly #chunkBytes: number;
  readonly #chunkMessages: number;
  readonly #newAssigner: () => BatchAssigner;
  readonly #assignerPerChunk: boolean;
  #assigner: BatchAssigner;
  #chunk: Outgoing[] = [];
  #bytes = 0;
  #inFlight: Promise<void> | undefined;

  constructor(options: ChunkSenderOptions) {
    this.#send = options.send;
    this.#chunkBytes = options.chunkBytes;
    this.#chunkMessages = options.chunkMessages ?? maxChunkMessages;
    this.#newAssigner = options.newAssigner;
    this.#assignerPerChunk = options.assignerPerChunk;
    this.#assigner = options.newAssigner();
  }

  assigner(): BatchAssigner {
    return this.#assigner;
  }

  /** Adds a message to the chunk being built; call `sendIfFull` after a record's messages. */
  push(message: Outgoing): void {
    this.#chunk.push(message);
    this.#bytes += message.bytes;
  }

  /**
   * Sends the chunk when it reached its bound: resolves once the chunk before
   * it was acknowledged and this one handed to the producer. Undefined when the
   * chunk is not full.
   */
  sendIfFull(): Promise<void> | undefined {
    if (this.#bytes >= this.#chunkBytes || this.#chunk.length >= this.#chunkMessages)
      return this.#sendChunk();
    return undefined;
  }

  /** Sends what is left and waits until every chunk is acknowledged. */
  async finish(): Promise<void> {
    await this.#sendChunk();
    const last = this.#inFlight;
    this.#inFlight = undefined;
    await last;
  }

  async #sendChunk(): Promise<void> {
    if (this.#chunk.length === 0) return;
    const chunk = this.#chunk;
    this.#chunk = [];
    this.#bytes = 0;
    const previous = this.#inFlight;
    this.#inFlight = undefined;
    await previous;
    const sending = this.#send(chunk);
    // Observed by the next #sendChunk or by finish; never left unhandled meanwhile.
    sending.catch(() => {});
    this.#inFlight = sending;
    if (this.#assignerPerChunk) this.#assigner = this.#newAssigner();
  }
}

// One table's changes of a batch held as the bytes of their default messages
// (Destination.changeBuffer, for a mirror without a script): each change's key
// and value JSON are written into byte chunks as it is decoded, instead of the
// change staying a set of objects until the batch is sent. Every change's
// message is written by the one encoder of the message from its rows'
// TupleData (message-json.ts), and a snapshot's rows' from their COPY text.
// The chunks live outside V8's heap, so a batch costs its young-generation
// collector nothing to keep (docs/benchmarks.md, "The engine's CPU per
// change"), and the producer gets views of them at send time.
import { type ChangeBuffer, ChangeList, type RowChange } from '../records.ts';
import type { TableFormat } from './message-format.ts';
import { MessageJson } from './message-json.ts';

/**
 * Bytes of a table's first chunk in a batch, doubling for each next one up to
 * the largest: a batch of a few rows (`streaming` at a low rate) takes little,
 * a large one few chunks. A larger message gets a chunk of its own size.
 */
const firstChunkBytes = 16 * 1024;
const largestChunkBytes = 256 * 1024;
/** Per message in the index: chunk number times two plus one for a truncate, start, key length (-1: null), value length. */
const indexFields = 4;
/** What a message's place in the index costs. */
const indexBytes = indexFields * 4;
const newline = 0x0a;

/**
 * A table's changes of a batch as the Kafka destination holds them: as their
 * default messages' bytes, or, for a mirror with a script, as the changes
 * themselves (the script reads records as objects at the send).
 */
export type KafkaHeld = HeldMessages | ScriptedChanges;

/** The changes of a scripted mirror's table, as objects until the script reads them at the send. */
export class ScriptedChanges extends ChangeList {
  readonly form = 'records';
}

/** A held message as the producer takes it. */
export interface HeldMessage {
  readonly key: Buffer | null;
  readonly value: Buffer;
  /** A truncate's key-less message, which goes to every partition. */
  readonly truncate: boolean;
}

export class HeldMessages implements ChangeBuffer {
  /** What the Kafka destination's buffers are told apart by (KafkaHeld). */
  readonly form = 'messages';
  readonly format: TableFormat;
  readonly #chunks: Buffer[] = [];
  /** Where the next message is written in the last chunk. */
  #offset = 0;
  #nextChunkBytes = firstChunkBytes;
  #index = new Int32Array(1024 * indexFields);
  #count = 0;
  readonly #writer: MessageJson;

  constructor(format: TableFormat) {
    this.format = format;
    this.#writer = MessageJson.for(format);
  }

  add(change: RowChange): number {
    return this.#addWritten(this.#writer.take(change), change.kind === 'truncate');
  }

  /**
   * Holds the snapshot rows of a block of whole COPY text lines (copy-text.ts,
   * copyTextLineBlocks), writing their messages from the bytes; returns how
   * many rows.
   */
  addSnapshotLines(block: Buffer): number {
    let rows = 0;
    for (let start = 0; start < block.length; rows++) {
      // Every line of a block ends with a newline; a last one without counts as ending there.
      const found = block.indexOf(newline, start);
      const end = found < 0 ? block.length : found;
      this.#addWritten(this.#writer.takeCopyLine(block, start, end), false);
      start = end + 1;
    }
    return rows;
  }

  /** Writes the message the writer took, in at most `most` bytes; returns the bytes it takes. */
  #addWritten(most: number, truncate: boolean): number {
    const writer = this.#writer;
    const chunk = this.#room(most);
    const start = this.#offset;
    const keyLength = writer.hasKey ? writer.writeKey(chunk, start) - start : -1;
    const valueStart = start + Math.max(keyLength, 0);
    const valueLength = writer.writeValue(chunk, valueStart) - valueStart;
    return this.#held(truncate, start, keyLength, valueLength);
  }

  /** The last chunk when `most` bytes fit in it after the last message, else a new one. */
  #room(most: number): Buffer {
    let chunk = this.#chunks.at(-1);
    if (!chunk || chunk.length - this.#offset < most) {
      chunk = Buffer.allocUnsafe(Math.max(this.#nextChunkBytes, most));
      this.#nextChunkBytes = Math.min(largestChunkBytes, this.#nextChunkBytes * 2);
      this.#chunks.push(chunk);
      this.#offset = 0;
    }
    return chunk;
  }

  /** Indexes the message just written at `start` of the last chunk; returns the bytes it takes. */
  #held(truncate: boolean, start: number, keyLength: number, valueLength: number): number {
    const bytes = Math.max(keyLength, 0) + valueLength;
    this.#offset = start + bytes;
    if ((this.#count + 1) * indexFields > this.#index.length) {
      const grown = new Int32Array(this.#index.length * 2);
      grown.set(this.#index);
      this.#index = grown;
    }
    const at = this.#count * indexFields;
    this.#index[at] = (this.#chunks.length - 1) * 2 + (truncate ? 1 : 0);
    this.#index[at + 1] = start;
    this.#index[at + 2] = keyLength;
    this.#index[at + 3] = valueLength;
    this.#count++;
    return bytes + indexBytes;
  }

  get messageCount(): number {
    return this.#count;
  }

  /** The messages in the order their changes came, as views of the held bytes. */
  *messages(): Generator<HeldMessage> {
    const index = this.#index;
    for (let at = 0; at < this.#count * indexFields; at += indexFields) {
      const place = index[at] as number;
      const chunk = this.#chunks[place >> 1] as Buffer;
      const start = index[at + 1] as number;
      const keyLength = index[at + 2] as number;
      const valueStart = start + Math.max(keyLength, 0);
      yield {
        key: keyLength < 0 ? null : chunk.subarray(start, valueStart),
        value: chunk.subarray(valueStart, valueStart + (index[at + 3] as number)),
        truncate: (place & 1) === 1,
      };
    }
  }
}

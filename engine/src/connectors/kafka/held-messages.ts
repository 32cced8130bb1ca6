// One table's changes of a batch held as the bytes of their default messages
// (Destination.changeBuffer, for a mirror without a script): each change's key
// and value JSON are written into byte chunks as it is decoded, instead of the
// change staying a set of objects until the batch is sent. An insert or update
// that comes undecoded has its message written from its bytes (row-json.ts),
// and so have a snapshot's rows from their COPY text. The chunks live outside V8's
// heap, so a batch costs its young-generation collector nothing to keep
// (docs/benchmarks.md, "The engine's CPU per change"), and the producer gets
// views of them at send time.
import { EngineError } from '../../errors.ts';
import {
  type ChangeBuffer,
  ChangeList,
  type Row,
  type RowChange,
  type SourceTransaction,
} from '../records.ts';
import { changeRecord, type TableFormat } from './message-format.ts';
import { RowJson } from './row-json.ts';

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
  /** The writer of new rows from the source's bytes; null for a table it cannot write. */
  #rowJson: RowJson | null | undefined;

  constructor(format: TableFormat) {
    this.format = format;
  }

  add(change: RowChange): number {
    // A new row alone (an insert, an update without an old image) that is the
    // source's bytes has its message written from them when the table allows.
    if (change.kind === 'insert' || (change.kind === 'update' && change.oldKey === null)) {
      const held = this.#addSourceBytes(change.kind, change.newRow, change.transaction);
      if (held !== undefined) return held;
    }
    const record = changeRecord(this.format, change);
    const { key, json } = record;
    // UTF-8 takes at most three bytes per UTF-16 code unit.
    const chunk = this.#room(3 * ((key?.length ?? 0) + json.length));
    const start = this.#offset;
    const keyLength = key === null ? -1 : chunk.write(key, start);
    const valueStart = start + Math.max(keyLength, 0);
    const valueLength = chunk.write(json, valueStart);
    return this.#held(record.kind === 'truncate', start, keyLength, valueLength);
  }

  /** Holds a new row from the source's bytes (row-json.ts); undefined when it cannot be written so. */
  #addSourceBytes(kind: 'insert' | 'update', row: Row, transaction: SourceTransaction): number | undefined {
    if (!row.fromSourceBytes) return undefined;
    const writer = this.#writer();
    if (
      writer === null ||
      row.width !== writer.columnCount ||
      (kind === 'update' && row.hasUnchangedToast())
    ) {
      return undefined;
    }
    return this.#addWritten(writer, writer.takeTuple(kind, row.tupleData(), transaction));
  }

  /**
   * Holds the snapshot rows of a block of whole COPY text lines (copy-text.ts,
   * copyTextLineBlocks), writing their messages from the bytes; returns how
   * many rows. Only for a table that `writesFromBytes`.
   */
  addSnapshotLines(block: Buffer): number {
    const writer = this.#writer();
    if (writer === null)
      throw new EngineError('internal', 'snapshot rows held as bytes for a table not written so');
    let rows = 0;
    for (let start = 0; start < block.length; rows++) {
      // Every line of a block ends with a newline; a last one without counts as ending there.
      const found = block.indexOf(newline, start);
      const end = found < 0 ? block.length : found;
      this.#addWritten(writer, writer.takeCopyLine(block, start, end));
      start = end + 1;
    }
    return rows;
  }

  /** Whether the messages of the table's new rows are written from the source's bytes (row-json.ts). */
  static writesFromBytes(format: TableFormat): boolean {
    return RowJson.writes(format);
  }

  #writer(): RowJson | null {
    if (this.#rowJson === undefined) this.#rowJson = RowJson.for(this.format) ?? null;
    return this.#rowJson;
  }

  /** Writes the row `writer` took, in at most `most` bytes; returns the bytes it takes. */
  #addWritten(writer: RowJson, most: number): number {
    const chunk = this.#room(most);
    const start = this.#offset;
    const keyLength = writer.hasKey ? writer.writeKey(chunk, start) - start : -1;
    const valueStart = start + Math.max(keyLength, 0);
    const valueLength = writer.writeValue(chunk, valueStart) - valueStart;
    return this.#held(false, start, keyLength, valueLength);
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

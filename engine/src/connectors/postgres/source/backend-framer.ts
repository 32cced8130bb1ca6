// Frames the messages a PostgreSQL server sends on one connection, from the
// socket's reads as they come, for the replication stream (replication-copy.ts):
// each CopyData payload is handed over in place, as bytes [start, end) of the
// read, and every other message goes on, as whole messages, to pg's own parser,
// which keeps the connection's state. pg's parser makes a Buffer view, a
// message object and an event for every CopyData message, about a tenth of the
// engine's CPU a change (docs/benchmarks.md, "The replication stream framed in
// place").
// https://www.postgresql.org/docs/current/protocol-overview.html#PROTOCOL-MESSAGE-CONCEPTS

/** A message: a type byte, then an Int32 length that counts itself but not the type. */
const headerBytes = 5;
const copyDataType = 0x64; // 'd'

export interface BackendFramerHandlers {
  /**
   * One CopyData payload, bytes [start, end) of `data`, valid only during the
   * call. Returns false to leave the message to `other`.
   */
  readonly copyData: (data: Buffer, start: number, end: number) => boolean;
  /** Whole messages, in order, for pg's parser; the buffer may be a view of a read. */
  readonly other: (messages: Buffer) => void;
  /** A length no message can have: the stream is out of frame, and nothing more is framed. */
  readonly invalid: (error: Error) => void;
}

/**
 * Contract: `push` every read of the connection, in order, starting at a
 * message boundary. Handlers are called synchronously, in the order of the
 * messages; a message split across reads is handed over once it is whole.
 */
export class BackendFramer {
  readonly #handlers: BackendFramerHandlers;
  /** The start of a message not yet whole, copied from the reads it came in. */
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  /** The whole pending message's size; undefined until its header is. */
  #pendingNeeds: number | undefined;
  #invalid = false;

  constructor(handlers: BackendFramerHandlers) {
    this.#handlers = handlers;
  }

  push(read: Buffer): void {
    if (this.#invalid) return;
    let offset = 0;
    if (this.#pendingBytes > 0) {
      offset = this.#completePending(read);
      if (offset < 0) return;
    }
    this.#frame(read, offset);
  }

  /**
   * Adds to the message begun in earlier reads what `read` holds of it; once
   * it is whole, frames it alone and returns where `read` goes on past it
   * (-1 while it is not whole yet, or when its length is invalid).
   */
  #completePending(read: Buffer): number {
    let used = 0;
    if (this.#pendingNeeds === undefined) {
      used = this.#takePending(read, 0, headerBytes - this.#pendingBytes);
      if (this.#pendingBytes < headerBytes) return -1;
      const header = Buffer.concat(this.#pending, this.#pendingBytes);
      this.#pending = [header];
      const length = header.readInt32BE(1);
      if (length < 4) {
        this.#fail(length);
        return -1;
      }
      this.#pendingNeeds = 1 + length;
    }
    used += this.#takePending(read, used, this.#pendingNeeds - this.#pendingBytes);
    if (this.#pendingBytes < this.#pendingNeeds) return -1;
    // A large message arrives over many reads: they are joined once, when it is whole.
    const message = Buffer.concat(this.#pending, this.#pendingBytes);
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#pendingNeeds = undefined;
    this.#frame(message, 0);
    return used;
  }

  /** Copies up to `wanted` bytes of `read` from `from` on into the pending message (the read is not ours to keep); returns how many. */
  #takePending(read: Buffer, from: number, wanted: number): number {
    const taken = Math.min(wanted, read.length - from);
    if (taken > 0) {
      this.#pending.push(Buffer.from(read.subarray(from, from + taken)));
      this.#pendingBytes += taken;
    }
    return taken;
  }

  #fail(length: number): void {
    this.#invalid = true;
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#handlers.invalid(new Error(`server message with invalid length ${length}`));
  }

  #frame(data: Buffer, from: number): void {
    const handlers = this.#handlers;
    let offset = from;
    /** The start of a run of messages for `other`, or -1. */
    let othersFrom = -1;
    while (data.length - offset >= headerBytes) {
      const length = data.readInt32BE(offset + 1);
      if (length < 4) {
        if (othersFrom >= 0) handlers.other(data.subarray(othersFrom, offset));
        this.#fail(length);
        return;
      }
      const end = offset + 1 + length;
      if (end > data.length) break;
      if (data[offset] === copyDataType) {
        // The messages before it go first: one of them may start the copy.
        if (othersFrom >= 0) {
          handlers.other(data.subarray(othersFrom, offset));
          othersFrom = -1;
        }
        if (!handlers.copyData(data, offset + headerBytes, end)) othersFrom = offset;
      } else if (othersFrom < 0) {
        othersFrom = offset;
      }
      offset = end;
    }
    if (othersFrom >= 0) handlers.other(data.subarray(othersFrom, offset));
    if (offset < data.length) {
      // The loop checked its length if its header is here.
      const needs = data.length - offset >= headerBytes ? 1 + data.readInt32BE(offset + 1) : undefined;
      this.#takePending(data, offset, data.length - offset);
      this.#pendingNeeds = needs;
    }
  }
}

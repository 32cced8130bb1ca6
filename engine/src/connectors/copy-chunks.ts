// COPY text for the wire in large chunks. pg-copy-streams frames every chunk it
// is given as one CopyData message with two socket writes (its header, then the
// data); fed one line per row, the socket write was the apply's hottest call
// (issue 16's profile: ~40% self time). One chunk per ~64 KiB of lines makes it
// a few writes per batch, and the server sees the same byte stream: CopyData
// boundaries need not match row boundaries.
// https://www.postgresql.org/docs/current/protocol-flow.html#PROTOCOL-COPY
//
// A batch holds its lines this way from the moment they are made
// (copy-rows.ts, staged-changes.ts): a sealed chunk's bytes live outside V8's
// heap, so its collector neither walks nor copies them.

/** About the size of a socket buffer: large enough to amortise the writes, small enough to stay bounded. */
export const copyChunkBytes = 64 * 1024;

/**
 * Lines joined in order into UTF-8 chunks of at least `chunkBytes` bytes (the
 * last may be shorter; so may one that a line written as bytes did not fit,
 * below); a chunk ends on a line end, so no line is split. Lines come as
 * strings (`add`) or are written as bytes straight into the chunk being filled
 * (`addWritten`). A chunk is sealed as soon as it is full: only the one being
 * filled is a string or a buffer with room left.
 */
export class CopyTextChunks {
  readonly #chunkBytes: number;
  readonly #chunks: Buffer[] = [];
  /** The number of the first line of each sealed chunk. */
  readonly #firstLines: number[] = [];
  /** Lines added as strings, not yet sealed, from line #pendingFirstLine on. */
  #pending = '';
  /** Lines written as bytes, not yet sealed: the first #writtenLength bytes of #written. */
  #written: Buffer | undefined;
  #writtenLength = 0;
  #pendingFirstLine = 0;
  #lineCount = 0;

  constructor(chunkBytes = copyChunkBytes) {
    this.#chunkBytes = chunkBytes;
  }

  /** Appends one line, its line end included. */
  add(line: string): void {
    if (this.#writtenLength > 0) this.#seal();
    this.#pending += line;
    this.#lineCount++;
    if (this.#pending.length >= this.#chunkBytes) this.#seal();
  }

  /**
   * Appends one line that `write` writes, its line end included, into
   * `target` from `offset` on, in at most `maxBytes` bytes; `write` returns
   * where the line ends. Returns the bytes the line took. A line that might
   * not fit in the chunk being filled starts the next one.
   */
  addWritten(maxBytes: number, write: (target: Buffer, offset: number) => number): number {
    if (this.#pending.length > 0) this.#seal();
    if (this.#written === undefined || this.#writtenLength + maxBytes > this.#written.length) {
      this.#seal();
      this.#written = Buffer.allocUnsafe(Math.max(this.#chunkBytes, maxBytes));
    }
    const start = this.#writtenLength;
    this.#writtenLength = write(this.#written, start);
    this.#lineCount++;
    if (this.#writtenLength >= this.#chunkBytes) this.#seal();
    return this.#writtenLength - start;
  }

  /** Every line added so far, in chunks; may be read again. */
  chunks(): readonly Buffer[] {
    this.#seal();
    return this.#chunks;
  }

  /** The number of the first line of each chunk `chunks()` returned. */
  get firstLines(): readonly number[] {
    return this.#firstLines;
  }

  #seal(): void {
    if (this.#pending.length > 0) {
      this.#chunks.push(Buffer.from(this.#pending, 'utf8'));
      this.#pending = '';
    } else if (this.#writtenLength > 0 && this.#written) {
      this.#chunks.push(this.#written.subarray(0, this.#writtenLength));
      // What is left of the buffer goes with the sealed chunk: a line that
      // did not fit is at most a row long.
      this.#written = undefined;
      this.#writtenLength = 0;
    } else {
      return;
    }
    this.#firstLines.push(this.#pendingFirstLine);
    this.#pendingFirstLine = this.#lineCount;
  }
}

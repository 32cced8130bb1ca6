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
 * Lines joined in order into UTF-8 chunks of at least `chunkBytes` characters
 * (the last may be shorter); a chunk ends on a line end, so no line is split.
 * A chunk is sealed as soon as it is full: only the one being filled is a string.
 */
export class CopyTextChunks {
  readonly #chunkBytes: number;
  readonly #chunks: Buffer[] = [];
  /** The number of the first line of each sealed chunk. */
  readonly #firstLines: number[] = [];
  /** Lines not yet sealed, from line #pendingFirstLine on. */
  #pending = '';
  #pendingFirstLine = 0;
  #lineCount = 0;

  constructor(chunkBytes = copyChunkBytes) {
    this.#chunkBytes = chunkBytes;
  }

  /** Appends one line, its line end included. */
  add(line: string): void {
    this.#pending += line;
    this.#lineCount++;
    if (this.#pending.length >= this.#chunkBytes) this.#seal();
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
    if (this.#pending.length === 0) return;
    this.#chunks.push(Buffer.from(this.#pending, 'utf8'));
    this.#firstLines.push(this.#pendingFirstLine);
    this.#pending = '';
    this.#pendingFirstLine = this.#lineCount;
  }
}

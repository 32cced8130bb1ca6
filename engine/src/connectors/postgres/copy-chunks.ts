// COPY text for the wire in large chunks. pg-copy-streams frames every chunk it
// is given as one CopyData message with two socket writes (its header, then the
// data); fed one line per row, the socket write was the apply's hottest call
// (issue 16's profile: ~40% self time). One chunk per ~64 KiB of lines makes it
// a few writes per batch, and the server sees the same byte stream: CopyData
// boundaries need not match row boundaries.
// https://www.postgresql.org/docs/current/protocol-flow.html#PROTOCOL-COPY

/** About the size of a socket buffer: large enough to amortise the writes, small enough to stay bounded. */
export const copyChunkBytes = 64 * 1024;

/**
 * Joins `lines` in order into chunks of at least `chunkBytes` characters (the
 * last may be shorter); a chunk ends on a line end, so no line is split.
 * Lazy: holds at most one chunk, as the lines come.
 */
export function* copyChunks(lines: Iterable<string>, chunkBytes = copyChunkBytes): Generator<Buffer> {
  let chunk = '';
  for (const line of lines) {
    chunk += line;
    if (chunk.length >= chunkBytes) {
      yield Buffer.from(chunk, 'utf8');
      chunk = '';
    }
  }
  if (chunk.length > 0) yield Buffer.from(chunk, 'utf8');
}

// A logical replication stream over pgoutput. It yields decoded messages and
// reports back only the flush position the pipeline hands it: the slot never
// advances past what the destination made durable. Status updates also go out
// on a timer so the server's wal_sender_timeout never fires while a batch syncs.
// After a restart inside a transaction larger than a batch, the changes the
// destination holds of it are dropped here, before their rows are decoded.
import type { Duplex } from 'node:stream';
import { both as copyBoth } from 'pg-copy-streams';
import { formatLsn } from '../../model/lsn.ts';
import type { RelationalConfig } from '../../resources/peer.ts';
import type { StreamEvent } from '../changes.ts';
import { classifyPgError } from '../classify.ts';
import type { ChangeStream } from '../source.ts';
import { connectPostgres, type PgConnection } from './connect.ts';
import { decodePgoutput } from './pgoutput.ts';
import { encodeStandbyStatus, parseReplicationMessage } from './replication-messages.ts';
import { quoteIdent, quoteLiteral } from './sql.ts';

const maxEventsPerRead = 4096;
/** CopyData messages the stream may hold unread: enough to decode in bulk. */
const bufferedMessages = 1024;

/** Resolves when `stream` has data to read or has ended; rejects on error. */
function readableOrEnd(stream: Duplex): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = () => {
      stream.off('readable', done);
      stream.off('end', done);
      stream.off('close', done);
      stream.off('error', failed);
      resolve();
    };
    const failed = (error: Error) => {
      done();
      reject(error);
    };
    stream.on('readable', done);
    stream.on('end', done);
    stream.on('close', done);
    stream.on('error', failed);
  });
}

export type { StreamEvent } from '../changes.ts';

export interface ReplicationStreamOptions {
  readonly slotName: string;
  readonly publicationName: string;
  readonly startLsn: bigint;
  readonly applicationName: string;
  readonly statusIntervalMs?: number;
  /** Source.openStream's `skipBefore`: row changes of that transaction below `changeLsn` are left out. */
  readonly skipBefore?: { readonly commitLsn: bigint; readonly changeLsn: bigint } | undefined;
}

/** pgoutput's row change tags: Insert, Update, Delete, Truncate. */
const rowChangeTags = new Set([0x49, 0x55, 0x44, 0x54]);
const beginTag = 0x42;
const commitTag = 0x43;

export class ReplicationStream implements ChangeStream {
  readonly #connection: PgConnection;
  readonly #copy: Duplex;
  readonly #timer: NodeJS.Timeout;
  #flushedLsn: bigint;
  #serverWalEnd = 0n;
  #closed = false;
  /** The stream's error, kept until `events()` can throw it. */
  #failure: Error | undefined;
  /** Until the transaction it names has been read past. */
  #skipBefore: ReplicationStreamOptions['skipBefore'];
  /** Inside that transaction now. */
  #skipping = false;

  private constructor(
    connection: PgConnection,
    copy: Duplex,
    options: ReplicationStreamOptions,
    statusIntervalMs: number,
  ) {
    this.#connection = connection;
    this.#copy = copy;
    this.#flushedLsn = options.startLsn;
    this.#skipBefore = options.skipBefore;
    // Always listening: an error between reads must not go unhandled.
    copy.on('error', (error: Error) => {
      this.#failure ??= error;
    });
    // Asking for a reply makes the server answer with a keepalive carrying its
    // sent position, which an idle pipeline uses to let the slot follow.
    this.#timer = setInterval(() => this.#sendStatus(true), statusIntervalMs);
    this.#timer.unref();
  }

  static async start(
    config: RelationalConfig,
    options: ReplicationStreamOptions,
  ): Promise<ReplicationStream> {
    const connection = await connectPostgres(config, {
      replication: 'database',
      applicationName: options.applicationName,
    });
    // Protocol 1 without streaming: the server hands over each transaction at
    // commit, so a batch never sees changes that might still abort. Object mode
    // keeps one chunk per CopyData message; a byte stream would merge them.
    const publications = quoteLiteral(quoteIdent(options.publicationName));
    const command =
      `START_REPLICATION SLOT ${quoteIdent(options.slotName)} LOGICAL ${formatLsn(options.startLsn)} ` +
      `(proto_version '1', publication_names ${publications})`;
    const copy = connection.client.query(
      copyBoth(command, {
        alignOnCopyDataFrame: true,
        readableObjectMode: true,
        readableHighWaterMark: bufferedMessages,
      }),
    );
    return new ReplicationStream(connection, copy, options, options.statusIntervalMs ?? 10_000);
  }

  /**
   * Decoded events in WAL order, in arrays of whatever had arrived (at most
   * `maxEventsPerRead`): one await per socket read rather than per message.
   * Not reading pauses the socket, so a slow consumer holds the server back
   * instead of filling memory.
   */
  async *events(): AsyncGenerator<readonly StreamEvent[]> {
    const copy = this.#copy;
    try {
      for (;;) {
        const events: StreamEvent[] = [];
        while (events.length < maxEventsPerRead) {
          const chunk: Buffer | null = copy.read();
          if (chunk === null) break;
          const event = this.#decode(chunk);
          if (event) events.push(event);
        }
        if (events.length > 0) {
          yield events;
          continue;
        }
        if (this.#failure) throw this.#failure;
        if (copy.readableEnded || copy.destroyed) return;
        await readableOrEnd(copy);
      }
    } catch (error) {
      if (this.#closed) return;
      throw classifyPgError(error, 'source: replication stream', 'connection');
    }
  }

  /** The event of one CopyData message; undefined for a row change left out (skipBefore). */
  #decode(chunk: Buffer): StreamEvent | undefined {
    const message = parseReplicationMessage(chunk);
    if (message.walEnd > this.#serverWalEnd) this.#serverWalEnd = message.walEnd;
    if (message.tag === 'keepalive') {
      if (message.replyRequested) this.#sendStatus(false);
      return { tag: 'keepalive', walEnd: message.walEnd };
    }
    const { payload, dataStart } = message;
    const skipBefore = this.#skipBefore;
    if (skipBefore) {
      const tag = payload[dataStart] ?? 0;
      // Only the tag and the WAL position are read: a row's cells are never
      // decoded (most of the cost of reading a change) for a change left out.
      if (this.#skipping && rowChangeTags.has(tag) && message.walStart < skipBefore.changeLsn)
        return undefined;
      if (tag === commitTag && this.#skipping) {
        this.#skipping = false;
        this.#skipBefore = undefined;
      }
      if (tag === beginTag) {
        const begin = decodePgoutput(payload, dataStart);
        this.#skipping = begin.tag === 'begin' && begin.finalLsn === skipBefore.commitLsn;
        return { tag: 'change', walStart: message.walStart, message: begin };
      }
    }
    return { tag: 'change', walStart: message.walStart, message: decodePgoutput(payload, dataStart) };
  }

  /** The server's WAL end as it last reported it (0 until it has). */
  get serverWalEnd(): bigint {
    return this.#serverWalEnd;
  }

  get flushedLsn(): bigint {
    return this.#flushedLsn;
  }

  /** Reports `lsn` as flushed: the server may then recycle WAL before it. */
  acknowledge(lsn: bigint): void {
    if (lsn <= this.#flushedLsn) return;
    this.#flushedLsn = lsn;
    this.#sendStatus(false);
  }

  #sendStatus(replyRequested: boolean): void {
    if (this.#closed || !this.#copy.writable) return;
    const lsn = this.#flushedLsn;
    this.#copy.write(
      encodeStandbyStatus({ writtenLsn: lsn, flushedLsn: lsn, appliedLsn: lsn, replyRequested }),
    );
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#timer);
    this.#copy.destroy();
    await this.#connection.close().catch(() => {});
  }
}

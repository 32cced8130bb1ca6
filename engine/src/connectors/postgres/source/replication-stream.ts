// A logical replication stream over pgoutput. It yields decoded messages and
// reports back only the flush position the pipeline hands it: the slot never
// advances past what the destination made durable. Status updates also go out
// on a timer so the server's wal_sender_timeout never fires while a batch syncs.
// After a restart inside a transaction larger than a batch, the changes the
// destination holds of it are dropped here, before their rows are decoded.
import { formatLsn } from '../../../model/lsn.ts';
import type { RelationalConfig } from '../../../resources/peer.ts';
import type { StreamEvent } from '../../changes.ts';
import { classifyPgError } from '../../classify/index.ts';
import type { ChangeStream } from '../../source.ts';
import { connectPostgres, type PgConnection } from '../driver/connect.ts';
import { quoteIdent, quoteLiteral } from '../driver/sql.ts';
import { decodePgoutput } from './pgoutput.ts';
import { ReplicationCopy } from './replication-copy.ts';
import { encodeStandbyStatus, parseReplicationMessage } from './replication-messages.ts';

const maxEventsPerRead = 4096;
/**
 * Decoded events held unread before the socket is paused (the server then
 * waits): enough to hand over in bulk, few enough to bound the memory.
 */
const bufferedEvents = 4096;
/**
 * How long the socket rests once the reader has taken all it read and the
 * socket was empty (#rest): longer while the stream runs fast (at least
 * `fastStreamBytes` read since the last rest: a backlog is being drained),
 * when large writes save the walsender the most and nobody waits on one
 * change; shorter otherwise, where the rest is added to every change's latency.
 */
const restMs = { fast: 10, slow: 5 } as const;
/** Bytes read between two rests that mark a fast stream: over 128 KiB in the 10–20 ms of a rest and the reading after it. */
const fastStreamBytes = 128 * 1024;
/**
 * Node reads a socket up to 64 KiB at a time: a shorter read emptied it, the
 * server has sent everything it had so far, so a rest costs no throughput,
 * only up to `restMs` of latency.
 */
const socketReadBytes = 64 * 1024;

export type { StreamEvent } from '../../changes.ts';

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
  readonly #copy: ReplicationCopy;
  readonly #timer: NodeJS.Timeout;
  #flushedLsn: bigint;
  #serverWalEnd = 0n;
  /** The socket's bytes read when it last rested (ReplicationCopy.readBytes). */
  #readBytesAtRest = 0;
  #closed = false;
  /** Decoded as the messages arrive, taken by `events()`. */
  #buffered: StreamEvent[] = [];
  #paused = false;
  /** Wakes `events()` waiting for the next message or the copy's end. */
  #wake: (() => void) | undefined;
  /** Until the transaction it names has been read past. */
  #skipBefore: ReplicationStreamOptions['skipBefore'];
  /** Inside that transaction now. */
  #skipping = false;

  private constructor(connection: PgConnection, options: ReplicationStreamOptions, statusIntervalMs: number) {
    this.#connection = connection;
    this.#flushedLsn = options.startLsn;
    this.#skipBefore = options.skipBefore;
    // Protocol 1 without streaming: the server hands over each transaction at
    // commit, so a batch never sees changes that might still abort.
    const publications = quoteLiteral(quoteIdent(options.publicationName));
    const command =
      `START_REPLICATION SLOT ${quoteIdent(options.slotName)} LOGICAL ${formatLsn(options.startLsn)} ` +
      `(proto_version '1', publication_names ${publications})`;
    this.#copy = new ReplicationCopy(command, {
      onMessage: (data, start, end) => this.#receive(data, start, end),
      onStop: () => this.#wakeReader(),
    });
    connection.client.query(this.#copy);
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
    return new ReplicationStream(connection, options, options.statusIntervalMs ?? 10_000);
  }

  /**
   * Decoded events in WAL order, in arrays of whatever had arrived (at most
   * `maxEventsPerRead`): one await per socket read rather than per message.
   * Events not taken pause the socket once `bufferedEvents` are held, so a
   * slow consumer holds the server back instead of filling memory.
   */
  async *events(): AsyncGenerator<readonly StreamEvent[]> {
    const copy = this.#copy;
    /** Whether the socket has rested since events were last taken. */
    let rested = false;
    try {
      for (;;) {
        if (this.#buffered.length > 0) {
          yield this.#take();
          rested = false;
          continue;
        }
        if (copy.failure) throw copy.failure;
        if (copy.stopped || this.#closed) return;
        if (!rested && copy.lastReadBytes < socketReadBytes) {
          rested = true;
          await this.#rest();
          continue;
        }
        await new Promise<void>((resolve) => {
          this.#wake = resolve;
        });
      }
    } catch (error) {
      if (this.#closed) return;
      throw classifyPgError(error, 'source: replication stream', 'connection');
    }
  }

  /**
   * Stops reading the socket for `restMs` once everything read has
   * been taken and the last read emptied the socket. The server's messages
   * then gather in the socket and in its own buffer and go out in large
   * writes, instead of one write (and one wake-up of this process) each while
   * the reader keeps up: a caught-up mirror's walsender spent 15–20% less CPU
   * a row (docs/benchmarks.md, "Reading the replication stream through pg's
   * parser"), CPU it shares with the engine and the destination on a small
   * machine. Draining a backlog on 2 cores, where the walsender is the busiest
   * process, 10 ms after any read that emptied the socket gave PG → PG and
   * PG → ClickHouse `streaming` CDC 5–7% more than 5 ms after a read under 32
   * KiB ("Resting the replication socket longer while it runs fast"); a
   * caught-up stream keeps the 5 ms, which its latency pays. A change waits at
   * most that long more.
   */
  async #rest(): Promise<void> {
    this.#copy.pause();
    const fast = this.#copy.readBytes - this.#readBytesAtRest >= fastStreamBytes;
    this.#readBytesAtRest = this.#copy.readBytes;
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      // Ended early by a close or by the copy stopping, never by a message: the socket is not read.
      this.#wake = resolve;
      timer = setTimeout(resolve, fast ? restMs.fast : restMs.slow);
    });
    clearTimeout(timer);
    this.#wake = undefined;
    if (!this.#paused) this.#copy.resume();
  }

  #take(): StreamEvent[] {
    let taken = this.#buffered;
    if (taken.length > maxEventsPerRead) {
      this.#buffered = taken.slice(maxEventsPerRead);
      taken = taken.slice(0, maxEventsPerRead);
    } else {
      this.#buffered = [];
    }
    if (this.#paused && this.#buffered.length < bufferedEvents) {
      this.#paused = false;
      this.#copy.resume();
    }
    return taken;
  }

  /** One CopyData payload, bytes [start, end) of a socket read, decoded while the read is at hand. */
  #receive(data: Buffer, start: number, end: number): void {
    const event = this.#decode(data, start, end);
    if (event === undefined) return;
    const buffered = this.#buffered;
    buffered.push(event);
    if (buffered.length === 1) this.#wakeReader();
    if (!this.#paused && buffered.length >= bufferedEvents) {
      this.#paused = true;
      this.#copy.pause();
    }
  }

  #wakeReader(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  /** The event of one CopyData payload; undefined for a row change left out (skipBefore). */
  #decode(data: Buffer, start: number, end: number): StreamEvent | undefined {
    const message = parseReplicationMessage(data, start, end);
    if (message.walEnd > this.#serverWalEnd) this.#serverWalEnd = message.walEnd;
    if (message.tag === 'keepalive') {
      if (message.replyRequested) this.#sendStatus(false);
      return { tag: 'keepalive', walEnd: message.walEnd };
    }
    const { payload, dataStart, dataEnd } = message;
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
        const begin = decodePgoutput(payload, dataStart, dataEnd);
        this.#skipping = begin.tag === 'begin' && begin.finalLsn === skipBefore.commitLsn;
        return { tag: 'change', walStart: message.walStart, message: begin };
      }
    }
    return {
      tag: 'change',
      walStart: message.walStart,
      message: decodePgoutput(payload, dataStart, dataEnd),
    };
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

  requestPosition(): void {
    this.#sendStatus(true);
  }

  #sendStatus(replyRequested: boolean): void {
    if (this.#closed) return;
    const lsn = this.#flushedLsn;
    this.#copy.send(
      encodeStandbyStatus({ writtenLsn: lsn, flushedLsn: lsn, appliedLsn: lsn, replyRequested }),
    );
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#timer);
    this.#wakeReader();
    await this.#connection.close().catch(() => {});
  }
}

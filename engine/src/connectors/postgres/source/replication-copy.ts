// The COPY BOTH phase that START_REPLICATION opens, run as a pg Submittable
// (the interface pg-cursor and pg-query-stream use). Once it is submitted, the
// connection's reads go through a BackendFramer (backend-framer.ts) instead of
// straight to pg's parser: each CopyData payload reaches `onMessage` in place,
// in the read's buffer, and every other message goes on to pg's parser, which
// keeps the connection's state and calls the handle* methods below. Framing
// the messages apart from pg and handing each through a Readable in object
// mode, as pg-copy-streams' `both` does, took about a fifth of the engine's CPU
// a change; pg's parser, which makes a view, a message and an event of each,
// about a tenth (docs/benchmarks.md, "Reading the replication stream", "The
// replication stream framed in place").
// https://www.postgresql.org/docs/current/protocol-flow.html#PROTOCOL-COPY
// https://www.postgresql.org/docs/current/protocol-replication.html
import type { Duplex } from 'node:stream';
import type pg from 'pg';
import { BackendFramer } from './backend-framer.ts';

/** What this uses of pg's Connection beyond its published type (pg/lib/connection.js). */
interface CopyConnection extends pg.Connection {
  readonly stream: Duplex;
  sendCopyFromChunk(payload: Buffer): void;
}

export interface ReplicationCopyHandlers {
  /**
   * One CopyData payload from the server: bytes [start, end) of `data`, a
   * socket read, valid only during the call: read it, or copy what must
   * outlive it. A throw stops the copy; it is reported by `failure`, never to
   * pg's parser.
   */
  readonly onMessage: (data: Buffer, start: number, end: number) => void;
  /** The copy failed (`failure` says why) or ended; nothing more arrives. */
  readonly onStop: () => void;
}

/**
 * The client's end of START_REPLICATION's COPY BOTH. Contract:
 * - Submit it with `client.query(copy)` on a replication connection; messages
 *   arrive through `onMessage`, in order, on pg's socket callbacks.
 * - `pause()` stops reading the socket (the server then waits on a full
 *   socket: the way to hold it back); `resume()` reads on. `lastReadBytes`
 *   tells whether the last read emptied the socket.
 * - `send` frames a payload as CopyData; before the server has answered with
 *   CopyBothResponse nothing may be sent, and `send` returns false.
 * - After `onStop`, `failure` holds the error that stopped it, if any.
 */
export class ReplicationCopy implements pg.Submittable {
  readonly #command: string;
  readonly #handlers: ReplicationCopyHandlers;
  #connection: CopyConnection | undefined;
  #started = false;
  #stopped = false;
  #failure: Error | undefined;
  #lastReadBytes = 0;
  #readBytes = 0;

  constructor(command: string, handlers: ReplicationCopyHandlers) {
    this.#command = command;
    this.#handlers = handlers;
  }

  /** The error that stopped the copy: the server's, the connection's, or one thrown by `onMessage`. */
  get failure(): Error | undefined {
    return this.#failure;
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  /**
   * The size of the socket's last read. A read shorter than the socket read
   * size means the socket had no more: the server has sent all it had so far.
   */
  get lastReadBytes(): number {
    return this.#lastReadBytes;
  }

  /** Every byte the socket has read since the copy was submitted. */
  get readBytes(): number {
    return this.#readBytes;
  }

  submit(connection: pg.Connection): void {
    const copyConnection = connection as CopyConnection;
    this.#connection = copyConnection;
    // pg parses CopyBothResponse but has no handler of its own for it.
    copyConnection.once('replicationStart', () => {
      this.#started = true;
    });
    this.#frameReads(copyConnection.stream);
    copyConnection.query(this.#command);
  }

  /**
   * Puts a BackendFramer between the socket and pg's parser for the rest of
   * the connection's life. pg submits this once the connection is idle, after
   * ReadyForQuery, when its parser holds no part of a message: the framer
   * starts at a message boundary.
   */
  #frameReads(stream: Duplex): void {
    const pgReaders = stream.listeners('data') as ((read: Buffer) => void)[];
    for (const reader of pgReaders) stream.off('data', reader);
    const framer = new BackendFramer({
      copyData: (data, start, end) => this.#copyData(data, start, end),
      other: (messages) => {
        for (const reader of pgReaders) reader(messages);
      },
      invalid: (error) => {
        this.#stop(error);
        this.pause();
      },
    });
    stream.on('data', (read: Buffer) => {
      this.#lastReadBytes = read.length;
      this.#readBytes += read.length;
      framer.push(read);
    });
  }

  /** One CopyData payload; false before the copy has started, so pg's parser gets it as before. */
  #copyData(data: Buffer, start: number, end: number): boolean {
    if (!this.#started) return false;
    if (this.#stopped) return true;
    try {
      this.#handlers.onMessage(data, start, end);
    } catch (error) {
      this.#stop(error instanceof Error ? error : new Error(String(error)));
      // The server goes on sending: stop reading, the owner closes the connection.
      this.pause();
    }
    return true;
  }

  pause(): void {
    this.#connection?.stream.pause();
  }

  resume(): void {
    this.#connection?.stream.resume();
  }

  /** Sends one CopyData payload; false when the copy has not started, has stopped, or the socket is closed. */
  send(payload: Buffer): boolean {
    const connection = this.#connection;
    if (!connection || !this.#started || this.#stopped || !connection.stream.writable) return false;
    connection.sendCopyFromChunk(payload);
    return true;
  }

  /** pg's parser got a CopyData message: only one sent before the copy started, which is out of order. */
  handleCopyData(): void {
    this.#stop(new Error('CopyData before START_REPLICATION was answered with CopyBothResponse'));
  }

  handleError(error: Error): void {
    this.#stop(error);
  }

  /** The server ended the copy (CopyDone, then CommandComplete). */
  handleCommandComplete(): void {
    this.#stop(undefined);
  }

  handleReadyForQuery(): void {
    this.#stop(undefined);
  }

  handleEmptyQuery(): void {
    this.#stop(new Error('START_REPLICATION was answered as an empty query'));
  }

  handleRowDescription(): void {}

  handleDataRow(): void {}

  handlePortalSuspended(): void {}

  handleCopyInResponse(): void {
    this.#stop(new Error('START_REPLICATION was answered with CopyInResponse, not CopyBothResponse'));
  }

  #stop(failure: Error | undefined): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#failure = failure;
    this.#handlers.onStop();
  }
}

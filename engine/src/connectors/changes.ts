// The change messages a source streams, in the shape of PostgreSQL's logical
// replication protocol (pgoutput,
// https://www.postgresql.org/docs/current/protocol-logicalrep-message-formats.html):
// transactions framed by begin and commit, relation descriptions before the
// row changes that use them. The pipeline reads these; a source produces them.
import type { Row, TupleCell } from './records.ts';

/** One column of a tuple as the decoder returns it (records.ts describes the cells). */
export type Tuple = readonly TupleCell[];

/**
 * A row's cells as pgoutput's TupleData, in a buffer of its own (an Int16
 * cell count, then per cell a kind byte: `n` null, `u` unchanged TOAST, or
 * `t` text and `b` binary, each of these two followed by an Int32 length and
 * the value's bytes), already checked to be well formed.
 * https://www.postgresql.org/docs/current/protocol-logicalrep-message-formats.html
 * Every Row offers its cells so (records.ts, Row.tupleData): a destination's
 * encoder copies the text bytes instead of making a string per cell.
 */
export interface TupleData {
  /** The TupleData, from its cell count on. */
  readonly bytes: Buffer;
  readonly cellCount: number;
}

/** The kind byte of each cell of a TupleData. */
export const tupleCellKind = {
  null: 0x6e, // 'n'
  unchangedToast: 0x75, // 'u'
  text: 0x74, // 't'
  binary: 0x62, // 'b'
} as const;

/** Where a TupleData's first cell starts: past its Int16 cell count. */
export const tupleCellsStart = 2;

/**
 * Where the TupleData cell whose kind byte is at `at` ends: the next cell's
 * kind byte. A text or binary cell's value is its last `end - at - 5` bytes.
 */
export function tupleCellEnd(bytes: Buffer, at: number): number {
  const kind = bytes[at];
  return kind === tupleCellKind.text || kind === tupleCellKind.binary
    ? at + 5 + bytes.readUInt32BE(at + 1)
    : at + 1;
}

export interface BeginMessage {
  readonly tag: 'begin';
  readonly finalLsn: bigint;
  /** Microseconds since the Unix epoch. */
  readonly commitTimeMicros: bigint;
  readonly xid: number;
}

export interface CommitMessage {
  readonly tag: 'commit';
  readonly flags: number;
  readonly commitLsn: bigint;
  /** End LSN of the transaction: the position to acknowledge once it is durable. */
  readonly endLsn: bigint;
  /** Microseconds since the Unix epoch. */
  readonly commitTimeMicros: bigint;
}

export interface OriginMessage {
  readonly tag: 'origin';
  readonly originLsn: bigint;
  readonly originName: string;
}

export type ReplicaIdentity = 'default' | 'nothing' | 'full' | 'index';

export interface RelationColumn {
  readonly name: string;
  readonly typeOid: number;
  readonly typeModifier: number;
  readonly isKey: boolean;
}

export interface RelationMessage {
  readonly tag: 'relation';
  readonly relationId: number;
  /** Empty for pg_catalog, as the server sends it. */
  readonly schema: string;
  readonly name: string;
  readonly replicaIdentity: ReplicaIdentity;
  readonly columns: readonly RelationColumn[];
}

export interface TypeMessage {
  readonly tag: 'type';
  readonly typeOid: number;
  readonly schema: string;
  readonly name: string;
}

export interface InsertMessage {
  readonly tag: 'insert';
  readonly relationId: number;
  /** A view over the message's bytes: most inserts reach a destination that copies them. */
  readonly newTuple: Row;
}

export interface UpdateMessage {
  readonly tag: 'update';
  readonly relationId: number;
  /** Old key columns, sent when replica identity is default or index and the key changed. */
  readonly keyTuple?: Tuple;
  /** The whole old row, sent when replica identity is full. */
  readonly oldTuple?: Tuple;
  /** A view over the message's bytes when the update carries no old image (an upsert of the new row). */
  readonly newTuple: Row;
}

/** Exactly one of `keyTuple` and `oldTuple` is present. */
export interface DeleteMessage {
  readonly tag: 'delete';
  readonly relationId: number;
  readonly keyTuple?: Tuple;
  readonly oldTuple?: Tuple;
}

export interface TruncateMessage {
  readonly tag: 'truncate';
  readonly relationIds: readonly number[];
  readonly cascade: boolean;
  readonly restartIdentity: boolean;
}

/** A pg_logical_emit_message() record. */
export interface LogicalDecodingMessage {
  readonly tag: 'message';
  readonly transactional: boolean;
  readonly lsn: bigint;
  readonly prefix: string;
  readonly content: Buffer;
}

export type SourceMessage =
  | BeginMessage
  | CommitMessage
  | OriginMessage
  | RelationMessage
  | TypeMessage
  | InsertMessage
  | UpdateMessage
  | DeleteMessage
  | TruncateMessage
  | LogicalDecodingMessage;

/** What a change stream yields, in WAL order. */
export type StreamEvent =
  | { readonly tag: 'change'; readonly walStart: bigint; readonly message: SourceMessage }
  /** The server has sent everything up to `walEnd`; nothing of ours is in between. */
  | { readonly tag: 'keepalive'; readonly walEnd: bigint };

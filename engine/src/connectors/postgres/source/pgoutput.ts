// Decoder for the pgoutput logical replication messages carried in XLogData,
// https://www.postgresql.org/docs/current/protocol-logicalrep-message-formats.html
//
// The engine starts the slot with proto_version '1' and neither `streaming` nor
// `two_phase`. Protocol 2+ sends the same bytes for every message below unless a
// transaction is streamed, so those decode too. Streamed transactions (Stream
// Start/Stop/Commit/Abort) and two-phase messages are refused with a decode error
// rather than decoded: inside a stream every data message gains a leading xid, so
// a stateless decoder that accepted Stream Start would misread what follows.
import { EngineError } from '../../../errors.ts';
import type {
  BeginMessage,
  CommitMessage,
  DeleteMessage,
  InsertMessage,
  LogicalDecodingMessage,
  OriginMessage,
  RelationColumn,
  RelationMessage,
  ReplicaIdentity,
  SourceMessage,
  TruncateMessage,
  Tuple,
  TypeMessage,
  UpdateMessage,
} from '../../changes.ts';
import { tupleCellKind } from '../../changes.ts';
import { type Row, type TupleCell, unchangedToast } from '../../records.ts';
import { TupleDataRow } from '../../rows.ts';
import { postgresEpochUnixMicros } from './replication-messages.ts';

export type {
  BeginMessage,
  CommitMessage,
  DeleteMessage,
  InsertMessage,
  LogicalDecodingMessage,
  OriginMessage,
  RelationColumn,
  RelationMessage,
  ReplicaIdentity,
  TruncateMessage,
  Tuple,
  TypeMessage,
  UpdateMessage,
} from '../../changes.ts';
/** pgoutput decodes to the source-neutral change messages of changes.ts. */
export type PgoutputMessage = SourceMessage;

/** A malformed or unsupported pgoutput message. The message never quotes row data. */
export class PgoutputDecodeError extends EngineError {
  /** The message type being decoded, e.g. 'Insert', or 'unknown'. */
  readonly messageType: string;
  /** Byte offset in the message where decoding failed. */
  readonly offset: number;

  constructor(messageType: string, offset: number, problem: string) {
    super('decode', `pgoutput ${messageType} message at byte ${offset}: ${problem}`);
    this.name = 'PgoutputDecodeError';
    this.messageType = messageType;
    this.offset = offset;
  }
}

const unsupportedTags = new Map([
  ['S', 'Stream Start'],
  ['E', 'Stream Stop'],
  ['c', 'Stream Commit'],
  ['A', 'Stream Abort'],
  ['p', 'Stream Prepare'],
  ['b', 'Begin Prepare'],
  ['P', 'Prepare'],
  ['K', 'Commit Prepared'],
  ['r', 'Rollback Prepared'],
]);

/**
 * Decodes the pgoutput message in bytes [start, end) of `data` (an XLogData
 * payload is decoded in place, in the socket's read buffer, without a copy or
 * a view of it). The result holds no view of `data`: every string and Buffer
 * in it is a copy. Throws PgoutputDecodeError on malformed input, with offsets
 * counted from `start`.
 */
export function decodePgoutput(data: Buffer, start = 0, end = data.length): PgoutputMessage {
  const tagByte = data[start];
  if (tagByte === undefined) throw new PgoutputDecodeError('unknown', 0, 'empty message');
  const tag = String.fromCharCode(tagByte);
  switch (tag) {
    case 'B':
      return decodeBegin(new Cursor(data, start, end, 'Begin'));
    case 'C':
      return decodeCommit(new Cursor(data, start, end, 'Commit'));
    case 'O':
      return decodeOrigin(new Cursor(data, start, end, 'Origin'));
    case 'R':
      return decodeRelation(new Cursor(data, start, end, 'Relation'));
    case 'Y':
      return decodeType(new Cursor(data, start, end, 'Type'));
    case 'I':
      return decodeInsert(new Cursor(data, start, end, 'Insert'));
    case 'U':
      return decodeUpdate(new Cursor(data, start, end, 'Update'));
    case 'D':
      return decodeDelete(new Cursor(data, start, end, 'Delete'));
    case 'T':
      return decodeTruncate(new Cursor(data, start, end, 'Truncate'));
    case 'M':
      return decodeLogicalMessage(new Cursor(data, start, end, 'Message'));
  }
  const unsupported = unsupportedTags.get(tag);
  if (unsupported !== undefined) {
    throw new PgoutputDecodeError(
      unsupported,
      0,
      'streamed and two-phase transactions are not supported (slot must use proto_version 1 without streaming or two_phase)',
    );
  }
  throw new PgoutputDecodeError('unknown', 0, `unknown tag 0x${tagByte.toString(16).padStart(2, '0')}`);
}

function decodeBegin(c: Cursor): BeginMessage {
  const finalLsn = c.uint64();
  const commitTimeMicros = c.timestamp();
  const xid = c.uint32();
  c.end();
  return { tag: 'begin', finalLsn, commitTimeMicros, xid };
}

function decodeCommit(c: Cursor): CommitMessage {
  const flags = c.uint8();
  const commitLsn = c.uint64();
  const endLsn = c.uint64();
  const commitTimeMicros = c.timestamp();
  c.end();
  return { tag: 'commit', flags, commitLsn, endLsn, commitTimeMicros };
}

function decodeOrigin(c: Cursor): OriginMessage {
  const originLsn = c.uint64();
  const originName = c.cstring();
  c.end();
  return { tag: 'origin', originLsn, originName };
}

// The REPLICA IDENTITY setting is sent as pg_class.relreplident.
const replicaIdentities = new Map<number, ReplicaIdentity>([
  [0x64 /* d */, 'default'],
  [0x6e /* n */, 'nothing'],
  [0x66 /* f */, 'full'],
  [0x69 /* i */, 'index'],
]);

function decodeRelation(c: Cursor): RelationMessage {
  const relationId = c.uint32();
  const schema = c.cstring();
  const name = c.cstring();
  const identityOffset = c.offset;
  const replicaIdentity = replicaIdentities.get(c.uint8());
  if (replicaIdentity === undefined) throw c.fail(identityOffset, 'unknown replica identity');
  const columnCount = c.uint16();
  const columns: RelationColumn[] = [];
  for (let i = 0; i < columnCount; i++) {
    // Column flags: bit 1 marks a column of the replica identity key.
    const isKey = (c.uint8() & 1) !== 0;
    const columnName = c.cstring();
    const typeOid = c.uint32();
    const typeModifier = c.int32();
    columns.push({ name: columnName, typeOid, typeModifier, isKey });
  }
  c.end();
  return { tag: 'relation', relationId, schema, name, replicaIdentity, columns };
}

function decodeType(c: Cursor): TypeMessage {
  const typeOid = c.uint32();
  const schema = c.cstring();
  const name = c.cstring();
  c.end();
  return { tag: 'type', typeOid, schema, name };
}

const markerNew = 0x4e; // 'N'
const markerKey = 0x4b; // 'K'
const markerOld = 0x4f; // 'O'

function decodeInsert(c: Cursor): InsertMessage {
  const relationId = c.uint32();
  c.expectMarker(markerNew);
  const newTuple = c.wireTuple();
  c.end();
  return { tag: 'insert', relationId, newTuple };
}

function decodeUpdate(c: Cursor): UpdateMessage {
  const relationId = c.uint32();
  const markerOffset = c.offset;
  const marker = c.uint8();
  if (marker === markerNew) {
    const newTuple = c.wireTuple();
    c.end();
    return { tag: 'update', relationId, newTuple };
  }
  if (marker !== markerKey && marker !== markerOld) throw c.fail(markerOffset, 'unknown tuple marker');
  const before = c.wireTuple();
  c.expectMarker(markerNew);
  const newTuple = c.wireTuple();
  c.end();
  return marker === markerKey
    ? { tag: 'update', relationId, keyTuple: before, newTuple }
    : { tag: 'update', relationId, oldTuple: before, newTuple };
}

function decodeDelete(c: Cursor): DeleteMessage {
  const relationId = c.uint32();
  const markerOffset = c.offset;
  const marker = c.uint8();
  if (marker !== markerKey && marker !== markerOld) throw c.fail(markerOffset, 'unknown tuple marker');
  const before = c.wireTuple();
  c.end();
  return marker === markerKey
    ? { tag: 'delete', relationId, keyTuple: before }
    : { tag: 'delete', relationId, oldTuple: before };
}

function decodeTruncate(c: Cursor): TruncateMessage {
  const relationCount = c.length();
  // Option bits: 1 = CASCADE, 2 = RESTART IDENTITY.
  const options = c.uint8();
  const relationIds: number[] = [];
  for (let i = 0; i < relationCount; i++) relationIds.push(c.uint32());
  c.end();
  return { tag: 'truncate', relationIds, cascade: (options & 1) !== 0, restartIdentity: (options & 2) !== 0 };
}

function decodeLogicalMessage(c: Cursor): LogicalDecodingMessage {
  // Flags: 1 = transactional. The leading xid of protocol 2 exists only in streams.
  const transactional = (c.uint8() & 1) !== 0;
  const lsn = c.uint64();
  const prefix = c.cstring();
  const content = c.bytes(c.length());
  c.end();
  return { tag: 'message', transactional, lsn, prefix, content };
}

/** From this length on, a V8 substring is a view of its parent string (SlicedString::kMinLength); shorter ones are copies. */
const shortestSubstringView = 13;

const {
  null: cellNull,
  unchangedToast: cellUnchangedToast,
  text: cellText,
  binary: cellBinary,
} = tupleCellKind;

/**
 * Reads big-endian fields, checking every length before Buffer reads so that a
 * malformed message fails as a PgoutputDecodeError naming where, never a RangeError.
 * `offset` is absolute in the buffer; errors name it relative to the message start.
 */
class Cursor {
  readonly #data: Buffer;
  readonly #start: number;
  /** Where the message ends in `#data`: it may be followed by other messages. */
  readonly #end: number;
  readonly #messageType: string;
  offset: number;
  /**
   * The whole message as one-byte characters, made at the first short text
   * cell: a short ASCII cell is then a substring of it, with no call into the
   * runtime (decoding each cell as UTF-8 on its own was the decoder's largest
   * cost, and most cells are short: keys, numbers).
   */
  #latin1: string | undefined;

  /** `offset`: where reading begins, past the message's tag byte unless said otherwise. */
  constructor(data: Buffer, start: number, end: number, messageType: string, offset = start + 1) {
    this.#data = data;
    this.#start = start;
    this.#end = end;
    this.#messageType = messageType;
    this.offset = offset;
  }

  fail(offset: number, problem: string): PgoutputDecodeError {
    return new PgoutputDecodeError(this.#messageType, offset - this.#start, problem);
  }

  /** Advances past `byteCount` bytes and returns where they start. */
  #take(byteCount: number): number {
    const start = this.offset;
    const left = this.#end - start;
    if (byteCount > left) throw this.fail(start, `truncated: needs ${byteCount} bytes, ${left} left`);
    this.offset = start + byteCount;
    return start;
  }

  uint8(): number {
    return this.#data.readUInt8(this.#take(1));
  }

  uint16(): number {
    return this.#data.readUInt16BE(this.#take(2));
  }

  int32(): number {
    return this.#data.readInt32BE(this.#take(4));
  }

  uint32(): number {
    return this.#data.readUInt32BE(this.#take(4));
  }

  uint64(): bigint {
    return this.#data.readBigUInt64BE(this.#take(8));
  }

  /** A TimestampTz (microseconds since 2000-01-01) as microseconds since the Unix epoch. */
  timestamp(): bigint {
    return this.#data.readBigInt64BE(this.#take(8)) + postgresEpochUnixMicros;
  }

  /** An Int32 count or byte length, which must not be negative. */
  length(): number {
    const start = this.offset;
    const value = this.int32();
    if (value < 0) throw this.fail(start, 'negative length');
    return value;
  }

  /** A NUL-terminated string; the server sends these in the database encoding, UTF-8 here. */
  cstring(): string {
    const start = this.offset;
    const nul = this.#data.indexOf(0, start);
    if (nul === -1 || nul >= this.#end) throw this.fail(start, 'missing NUL terminator');
    this.offset = nul + 1;
    return this.#data.toString('utf8', start, nul);
  }

  /** A copy: the message's buffer may be reused once it is decoded (replication-copy.ts). */
  bytes(byteCount: number): Buffer {
    const start = this.#take(byteCount);
    return Buffer.from(this.#data.subarray(start, start + byteCount));
  }

  expectMarker(marker: number): void {
    const start = this.offset;
    if (this.uint8() !== marker)
      throw this.fail(start, `expected tuple marker '${String.fromCharCode(marker)}'`);
  }

  /** The UTF-8 text in bytes [start, end) of the message. */
  #text(start: number, end: number): string {
    const data = this.#data;
    for (let index = start; index < end; index++) {
      if ((data[index] as number) > 0x7f) return data.toString('utf8', start, end);
    }
    // ASCII: latin1 reads the same characters, without UTF-8's checks. V8
    // makes a substring of 13 or more characters a view that keeps the whole
    // message string alive as long as the cell (a batch holds its cells for
    // seconds: +95 bytes a 5-column row, measured), so long cells are copied out.
    if (end - start >= shortestSubstringView) return data.toString('latin1', start, end);
    this.#latin1 ??= data.toString('latin1', this.#start, this.#end);
    return this.#latin1.substring(start - this.#start, end - this.#start);
  }

  /**
   * TupleData checked and copied out undecoded, as a row (rows.ts): its cells
   * are read only when asked for (a destination copies their bytes instead).
   */
  wireTuple(): Row {
    const start = this.offset;
    const columnCount = this.uint16();
    for (let i = 0; i < columnCount; i++) {
      const kindOffset = this.offset;
      const kind = this.uint8();
      if (kind === cellText || kind === cellBinary) this.#take(this.length());
      else if (kind !== cellNull && kind !== cellUnchangedToast) {
        throw this.fail(kindOffset, `unknown tuple column kind 0x${kind.toString(16).padStart(2, '0')}`);
      }
    }
    return new TupleDataRow(copyOut(this.#data, start, this.offset), columnCount, decodeCopiedTuple);
  }

  /** TupleData: an Int16 column count, then per column a kind byte and maybe a value. */
  tuple(): Tuple {
    const columnCount = this.uint16();
    const cells: TupleCell[] = [];
    for (let i = 0; i < columnCount; i++) {
      const kindOffset = this.offset;
      const kind = this.uint8();
      if (kind === cellText) {
        const start = this.#take(this.length());
        cells.push(this.#text(start, this.offset));
      } else if (kind === cellBinary) {
        cells.push(this.bytes(this.length()));
      } else if (kind === cellNull) {
        cells.push(null);
      } else if (kind === cellUnchangedToast) {
        cells.push(unchangedToast);
      } else {
        throw this.fail(kindOffset, `unknown tuple column kind 0x${kind.toString(16).padStart(2, '0')}`);
      }
    }
    return cells;
  }

  /** Every message has a fixed end; bytes past it mean a framing or version mismatch. */
  end(): void {
    if (this.offset !== this.#end) throw this.fail(this.offset, 'trailing bytes');
  }
}

// Inserts' tuples are copied out of the message (pg's parse buffer, which it
// reuses) into shared slabs: a view of a slab costs less than half a Buffer of
// its own, which took ~5% of the engine's CPU in a ClickHouse CDC profile
// (docs/benchmarks.md). A slab lives while any of its views does: a tuple is
// held from decoding until a destination copied or decoded it, and a slab is
// small, so a view kept longer pins little.
const tupleSlabBytes = 64 * 1024;
let tupleSlab = Buffer.allocUnsafe(tupleSlabBytes);
let tupleSlabUsed = 0;

/** Bytes [start, end) of `data`, copied into a slab (a large tuple into a buffer of its own). */
function copyOut(data: Buffer, start: number, end: number): Buffer {
  const length = end - start;
  if (length > tupleSlabBytes / 8) return Buffer.from(data.subarray(start, end));
  if (tupleSlabUsed + length > tupleSlabBytes) {
    tupleSlab = Buffer.allocUnsafe(tupleSlabBytes);
    tupleSlabUsed = 0;
  }
  data.copy(tupleSlab, tupleSlabUsed, start, end);
  const copied = tupleSlab.subarray(tupleSlabUsed, tupleSlabUsed + length);
  tupleSlabUsed += length;
  return copied;
}

/** The cells of a TupleData copied out of its message: checked when it was copied, so this cannot fail. */
function decodeCopiedTuple(bytes: Buffer): Tuple {
  return new Cursor(bytes, 0, bytes.length, 'Insert', 0).tuple();
}

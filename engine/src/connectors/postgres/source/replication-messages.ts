// The CopyData payloads of a streaming replication connection (START_REPLICATION),
// https://www.postgresql.org/docs/current/protocol-replication.html#PROTOCOL-REPLICATION-START-REPLICATION
// The server sends XLogData and Primary keepalive messages; the client answers
// with Standby status updates, whose flush position is what advances the slot.
import { EngineError } from '../../../errors.ts';

/** 2000-01-01T00:00:00Z, PostgreSQL's timestamp epoch, in microseconds since the Unix epoch. */
export const postgresEpochUnixMicros = 946_684_800_000_000n;

/**
 * WAL data; for a logical slot, bytes [dataStart, dataEnd) of `payload` hold
 * one output plugin message (pgoutput). The server's send time is not read:
 * nothing uses it, and this is parsed once per row change.
 */
export interface XLogData {
  readonly tag: 'xlogData';
  /** Start of the WAL in this message. */
  readonly walStart: bigint;
  /** Current end of WAL on the server. */
  readonly walEnd: bigint;
  /** The buffer the CopyData payload was given in: the data is read in place, without a copy or a view. */
  readonly payload: Buffer;
  /** Where the data starts in `payload`. */
  readonly dataStart: number;
  /** Where it ends. */
  readonly dataEnd: number;
}

export interface PrimaryKeepalive {
  readonly tag: 'keepalive';
  /** Current end of WAL on the server. */
  readonly walEnd: bigint;
  /** Server clock at transmission, in microseconds since the Unix epoch. */
  readonly serverTimeMicros: bigint;
  /** The server asks for a Standby status update soon, to avoid a timeout disconnect. */
  readonly replyRequested: boolean;
}

export type ServerReplicationMessage = XLogData | PrimaryKeepalive;

const xlogDataHeaderLength = 25; // Byte1 'w', Int64 walStart, Int64 walEnd, Int64 sendTime
const keepaliveLength = 18; // Byte1 'k', Int64 walEnd, Int64 sendTime, Byte1 reply

/**
 * Parses the CopyData payload in bytes [start, end) of `data` (by default all
 * of it) sent by the server; throws EngineError kind 'decode' if malformed.
 */
export function parseReplicationMessage(
  data: Buffer,
  start = 0,
  end = data.length,
): ServerReplicationMessage {
  const tag = start < end ? data[start] : undefined;
  if (tag === 0x77 /* 'w' */) {
    requireLength(end - start, 'XLogData', xlogDataHeaderLength, false);
    return {
      tag: 'xlogData',
      walStart: data.readBigUInt64BE(start + 1),
      walEnd: data.readBigUInt64BE(start + 9),
      payload: data,
      dataStart: start + xlogDataHeaderLength,
      dataEnd: end,
    };
  }
  if (tag === 0x6b /* 'k' */) {
    // The layout is fixed, so extra bytes mean the stream is out of frame.
    requireLength(end - start, 'Primary keepalive', keepaliveLength, true);
    return {
      tag: 'keepalive',
      walEnd: data.readBigUInt64BE(start + 1),
      serverTimeMicros: data.readBigInt64BE(start + 9) + postgresEpochUnixMicros,
      replyRequested: data[start + 17] !== 0,
    };
  }
  const shown = tag === undefined ? 'none (empty payload)' : `0x${tag.toString(16).padStart(2, '0')}`;
  throw new EngineError('decode', `replication message with unknown tag ${shown} at byte 0`);
}

function requireLength(payloadLength: number, messageType: string, length: number, exact: boolean): void {
  if (payloadLength < length) {
    throw new EngineError(
      'decode',
      `replication ${messageType} message truncated at byte ${payloadLength}: needs ${length} bytes`,
    );
  }
  if (exact && payloadLength > length) {
    throw new EngineError(
      'decode',
      `replication ${messageType} message has trailing bytes at byte ${length}`,
    );
  }
}

export interface StandbyStatus {
  /** Last WAL byte + 1 received and written by the client. */
  readonly writtenLsn: bigint;
  /**
   * Last WAL byte + 1 durable at the destination. For a logical slot this becomes
   * confirmed_flush_lsn and lets the server recycle WAL: send only what is durable.
   */
  readonly flushedLsn: bigint;
  /** Last WAL byte + 1 applied at the destination. */
  readonly appliedLsn: bigint;
  /** Asks the server to answer with a keepalive at once. */
  readonly replyRequested: boolean;
}

const standbyStatusLength = 34; // Byte1 'r', 4 × Int64, Byte1 reply

/**
 * Builds a Standby status update ('r') payload. The client clock is sent as
 * microseconds since 2000-01-01; `clientTimeUnixMicros` defaults to now. LSNs
 * outside the unsigned 64-bit range are a caller bug and throw Node's RangeError.
 */
export function encodeStandbyStatus(
  { writtenLsn, flushedLsn, appliedLsn, replyRequested }: StandbyStatus,
  clientTimeUnixMicros: bigint = BigInt(Date.now()) * 1000n,
): Buffer {
  const payload = Buffer.allocUnsafe(standbyStatusLength);
  payload[0] = 0x72; // 'r'
  payload.writeBigUInt64BE(writtenLsn, 1);
  payload.writeBigUInt64BE(flushedLsn, 9);
  payload.writeBigUInt64BE(appliedLsn, 17);
  payload.writeBigInt64BE(clientTimeUnixMicros - postgresEpochUnixMicros, 25);
  payload[33] = replyRequested ? 1 : 0;
  return payload;
}

// The CopyData payloads of a streaming replication connection (START_REPLICATION),
// https://www.postgresql.org/docs/current/protocol-replication.html#PROTOCOL-REPLICATION-START-REPLICATION
// The server sends XLogData and Primary keepalive messages; the client answers
// with Standby status updates, whose flush position is what advances the slot.
import { EngineError } from '../../errors.ts';

/** 2000-01-01T00:00:00Z, PostgreSQL's timestamp epoch, in microseconds since the Unix epoch. */
export const postgresEpochUnixMicros = 946_684_800_000_000n;

/**
 * WAL data; for a logical slot, `payload` holds one output plugin message
 * (pgoutput) from `dataStart` on. The server's send time is not read: nothing
 * uses it, and this is parsed once per row change.
 */
export interface XLogData {
  readonly tag: 'xlogData';
  /** Start of the WAL in this message. */
  readonly walStart: bigint;
  /** Current end of WAL on the server. */
  readonly walEnd: bigint;
  /** The CopyData payload as given: the data is read in place, without a copy or a view. */
  readonly payload: Buffer;
  /** Where the data starts in `payload`. */
  readonly dataStart: number;
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

/** Parses one CopyData payload sent by the server; throws EngineError kind 'decode' if malformed. */
export function parseReplicationMessage(payload: Buffer): ServerReplicationMessage {
  const tag = payload[0];
  if (tag === 0x77 /* 'w' */) {
    requireLength(payload, 'XLogData', xlogDataHeaderLength, false);
    return {
      tag: 'xlogData',
      walStart: payload.readBigUInt64BE(1),
      walEnd: payload.readBigUInt64BE(9),
      payload,
      dataStart: xlogDataHeaderLength,
    };
  }
  if (tag === 0x6b /* 'k' */) {
    // The layout is fixed, so extra bytes mean the stream is out of frame.
    requireLength(payload, 'Primary keepalive', keepaliveLength, true);
    return {
      tag: 'keepalive',
      walEnd: payload.readBigUInt64BE(1),
      serverTimeMicros: payload.readBigInt64BE(9) + postgresEpochUnixMicros,
      replyRequested: payload[17] !== 0,
    };
  }
  const shown = tag === undefined ? 'none (empty payload)' : `0x${tag.toString(16).padStart(2, '0')}`;
  throw new EngineError('decode', `replication message with unknown tag ${shown} at byte 0`);
}

function requireLength(payload: Buffer, messageType: string, length: number, exact: boolean): void {
  if (payload.length < length) {
    throw new EngineError(
      'decode',
      `replication ${messageType} message truncated at byte ${payload.length}: needs ${length} bytes`,
    );
  }
  if (exact && payload.length > length) {
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

import { describe, expect, it } from 'vitest';
import { EngineError } from '../../../errors.ts';
import {
  encodeStandbyStatus,
  parseReplicationMessage,
  postgresEpochUnixMicros,
} from './replication-messages.ts';

const highLsn = 0xf234_5678_9abc_de01n; // above 2^32 and 2^63
const unixMicros = 1_700_000_000_123_456n;

function xlogData(walStart: bigint, walEnd: bigint, sendTimeUnixMicros: bigint, data: Buffer): Buffer {
  const header = Buffer.alloc(25);
  header.write('w', 0, 'latin1');
  header.writeBigUInt64BE(walStart, 1);
  header.writeBigUInt64BE(walEnd, 9);
  header.writeBigInt64BE(sendTimeUnixMicros - postgresEpochUnixMicros, 17);
  return Buffer.concat([header, data]);
}

function keepalive(walEnd: bigint, sendTimeUnixMicros: bigint, reply: number): Buffer {
  const payload = Buffer.alloc(18);
  payload.write('k', 0, 'latin1');
  payload.writeBigUInt64BE(walEnd, 1);
  payload.writeBigInt64BE(sendTimeUnixMicros - postgresEpochUnixMicros, 9);
  payload[17] = reply;
  return payload;
}

function decodeErrorOf(run: () => unknown): EngineError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(EngineError);
    expect((error as EngineError).kind).toBe('decode');
    return error as EngineError;
  }
  throw new Error('expected a decode error');
}

describe('parseReplicationMessage', () => {
  it('parses XLogData and points at its data in the input, without a copy', () => {
    const payload = xlogData(highLsn, highLsn + 10n, unixMicros, Buffer.from('BODY'));
    const message = parseReplicationMessage(payload);
    expect(message).toEqual({
      tag: 'xlogData',
      walStart: highLsn,
      walEnd: highLsn + 10n,
      payload,
      dataStart: 25,
      dataEnd: payload.length,
    });
    if (message.tag !== 'xlogData') throw new Error('unreachable');
    expect(message.payload).toBe(payload);
    expect(payload.subarray(message.dataStart).toString()).toBe('BODY');
  });

  it('parses XLogData with empty data', () => {
    const message = parseReplicationMessage(xlogData(1n, 2n, unixMicros, Buffer.alloc(0)));
    expect(message).toMatchObject({ tag: 'xlogData', walStart: 1n, walEnd: 2n });
  });

  it('parses a keepalive with and without a reply request', () => {
    expect(parseReplicationMessage(keepalive(highLsn, unixMicros, 1))).toEqual({
      tag: 'keepalive',
      walEnd: highLsn,
      serverTimeMicros: unixMicros,
      replyRequested: true,
    });
    expect(parseReplicationMessage(keepalive(5n, postgresEpochUnixMicros, 0))).toEqual({
      tag: 'keepalive',
      walEnd: 5n,
      serverTimeMicros: postgresEpochUnixMicros,
      replyRequested: false,
    });
  });

  it('refuses an empty payload and unknown tags', () => {
    expect(decodeErrorOf(() => parseReplicationMessage(Buffer.alloc(0))).message).toMatch(/empty/);
    expect(decodeErrorOf(() => parseReplicationMessage(Buffer.from('r'))).message).toMatch(/0x72/);
  });

  it('refuses every truncated prefix', () => {
    for (const payload of [xlogData(highLsn, highLsn, unixMicros, Buffer.alloc(0)), keepalive(1n, 2n, 1)]) {
      for (let length = 0; length < payload.length; length++) {
        decodeErrorOf(() => parseReplicationMessage(payload.subarray(0, length)));
      }
    }
  });

  it('parses a payload between other bytes (a socket read) by its bounds', () => {
    const body = Buffer.from('BODY');
    const messages = [xlogData(highLsn, highLsn + 10n, unixMicros, body), keepalive(highLsn, unixMicros, 1)];
    for (const payload of messages) {
      const read = Buffer.concat([Buffer.from('before'), payload, Buffer.alloc(8, 0xff)]);
      const parsed = parseReplicationMessage(read, 6, 6 + payload.length);
      const alone = parseReplicationMessage(payload);
      if (parsed.tag === 'xlogData' && alone.tag === 'xlogData') {
        expect({ ...parsed, payload: null }).toEqual({
          ...alone,
          payload: null,
          dataStart: 6 + 25,
          dataEnd: 6 + 29,
        });
        expect(read.toString('latin1', parsed.dataStart, parsed.dataEnd)).toBe('BODY');
      } else {
        expect(parsed).toEqual(alone);
      }
      for (let end = 6; end < 6 + payload.length; end++) {
        if (payload[0] === 0x77 && end - 6 >= 25) continue; // XLogData's data may be empty
        decodeErrorOf(() => parseReplicationMessage(read, 6, end));
      }
    }
  });

  it('refuses a keepalive with trailing bytes', () => {
    const payload = Buffer.concat([keepalive(1n, 2n, 0), Buffer.from([0])]);
    expect(decodeErrorOf(() => parseReplicationMessage(payload)).message).toMatch(
      /trailing bytes at byte 18/,
    );
  });
});

describe('encodeStandbyStatus', () => {
  it('lays out the Standby status update', () => {
    const payload = encodeStandbyStatus(
      { writtenLsn: highLsn + 2n, flushedLsn: highLsn + 1n, appliedLsn: highLsn, replyRequested: true },
      unixMicros,
    );
    expect(payload.length).toBe(34);
    expect(payload.toString('latin1', 0, 1)).toBe('r');
    expect(payload.readBigUInt64BE(1)).toBe(highLsn + 2n);
    expect(payload.readBigUInt64BE(9)).toBe(highLsn + 1n);
    expect(payload.readBigUInt64BE(17)).toBe(highLsn);
    expect(payload.readBigInt64BE(25)).toBe(unixMicros - postgresEpochUnixMicros);
    expect(payload[33]).toBe(1);
  });

  it('sends the client clock in microseconds since 2000-01-01 by default', () => {
    const before = BigInt(Date.now()) * 1000n;
    const payload = encodeStandbyStatus({
      writtenLsn: 0n,
      flushedLsn: 0n,
      appliedLsn: 0n,
      replyRequested: false,
    });
    const after = BigInt(Date.now()) * 1000n;
    const sent = payload.readBigInt64BE(25) + postgresEpochUnixMicros;
    expect(sent >= before && sent <= after).toBe(true);
    expect(payload[33]).toBe(0);
  });
});

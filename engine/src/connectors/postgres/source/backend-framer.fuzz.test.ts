// Properties of the replication connection's framing over generated input
// (docs/security.md, "Fuzzing"): the backend framer over any split of any byte
// stream, and the CopyData payloads it hands over read as replication messages
// and pgoutput, as ReplicationStream does. None may throw anything but the
// engine's decode error, buffer more than the bytes it was given, or keep a
// view of a socket read.
// https://www.postgresql.org/docs/current/protocol-overview.html#PROTOCOL-MESSAGE-CONCEPTS
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { countBufferAllocations, fuzzParameters } from '../../../../../test/support/fuzz.ts';
import { EngineError } from '../../../errors.ts';
import { BackendFramer } from './backend-framer.ts';
import { decodePgoutput } from './pgoutput.ts';
import { parseReplicationMessage, postgresEpochUnixMicros } from './replication-messages.ts';

/** One backend message: type byte, Int32 length (itself included), body. */
function message(type: number, body: Uint8Array): Buffer {
  const header = Buffer.alloc(5);
  header[0] = type;
  header.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([header, body]);
}

/** What the framer handed over, as the bytes of the stream they stand for, and whether it stopped. */
interface Framed {
  /** CopyData messages framed again around their payloads, other messages as given. */
  readonly bytes: Buffer;
  /** The messages in order: CopyData payloads as hex, runs of other messages joined. */
  readonly events: readonly ({ copy: string } | { other: string })[];
  readonly invalidCount: number;
  /** Whether anything was handed over after `invalid`. */
  readonly afterInvalid: boolean;
}

/**
 * Pushes `reads` through a framer, each read zeroed once pushed (the socket's
 * buffer is not the framer's to keep). `takesCopy` says which CopyData
 * payloads the copy takes; the others go on with the other messages.
 */
function frame(reads: readonly Buffer[], takesCopy: (index: number) => boolean = () => true): Framed {
  const parts: Buffer[] = [];
  const events: ({ copy: string } | { other: string })[] = [];
  let invalidCount = 0;
  let afterInvalid = false;
  let copyIndex = 0;
  const other = (bytes: Buffer) => {
    const last = events.at(-1);
    if (last && 'other' in last) last.other += bytes.toString('hex');
    else events.push({ other: bytes.toString('hex') });
    parts.push(Buffer.from(bytes));
  };
  const framer = new BackendFramer({
    copyData: (data, start, end) => {
      if (invalidCount > 0) afterInvalid = true;
      expect(data[start - 5]).toBe(0x64);
      expect(data.readInt32BE(start - 4)).toBe(end - start + 4);
      if (!takesCopy(copyIndex++)) return false;
      const payload = data.subarray(start, end);
      events.push({ copy: payload.toString('hex') });
      parts.push(message(0x64, payload));
      return true;
    },
    other: (messages) => {
      if (invalidCount > 0) afterInvalid = true;
      other(messages);
    },
    invalid: (error) => {
      expect(error.message).toMatch(/^server message with invalid length -?\d+$/);
      invalidCount++;
    },
  });
  for (const read of reads) {
    framer.push(read);
    read.fill(0);
  }
  return { bytes: Buffer.concat(parts), events, invalidCount, afterInvalid };
}

/** `stream` cut at `cuts` (any numbers; taken modulo its length) into reads of their own. */
function split(stream: Buffer, cuts: readonly number[]): Buffer[] {
  if (stream.length === 0) return [];
  const points = [...new Set(cuts.map((cut) => cut % stream.length))].sort((a, b) => a - b);
  const reads: Buffer[] = [];
  let from = 0;
  for (const point of [...points, stream.length]) {
    if (point > from) reads.push(Buffer.from(stream.subarray(from, point)));
    from = point;
  }
  return reads;
}

/** Messages a replication connection carries: mostly CopyData, some others, now and then a large one. */
const backendMessage = fc
  .tuple(
    fc.oneof(
      { weight: 4, arbitrary: fc.constant(0x64) },
      { weight: 1, arbitrary: fc.constantFrom(0x57, 0x4e, 0x45, 0x63, 0x43, 0x5a, 0x53) },
      { weight: 1, arbitrary: fc.nat(255) },
    ),
    fc.oneof(
      { weight: 10, arbitrary: fc.uint8Array({ maxLength: 64 }) },
      {
        weight: 1,
        arbitrary: fc.integer({ min: 60_000, max: 140_000 }).map((size) => new Uint8Array(size).fill(7)),
      },
    ),
  )
  .map(([type, body]) => ({ type, body }));

const cuts = fc.array(fc.nat(), { maxLength: 12 });

describe('BackendFramer, generated streams', () => {
  it('hands over every message whole and in order, however the stream is split into reads (500 cases)', () => {
    fc.assert(
      fc.property(
        fc.array(backendMessage, { maxLength: 12 }),
        cuts,
        fc.array(fc.boolean()),
        (messages, cutPoints, taken) => {
          const stream = Buffer.concat(messages.map(({ type, body }) => message(type, body)));
          const takesCopy = (index: number) => taken[index] ?? true;
          const framed = frame(split(stream, cutPoints), takesCopy);
          // The same stream in one read is the reference: every split must agree with it.
          const whole = frame([Buffer.from(stream)], takesCopy);
          expect(framed.invalidCount).toBe(0);
          expect(framed.events).toEqual(whole.events);
          expect(framed.bytes.equals(stream)).toBe(true);
        },
      ),
      fuzzParameters(500),
    );
  });

  it('never throws on any bytes: it hands over a prefix of the stream, stops at most once, at a length below 4 (1000 cases)', () => {
    const corrupted = fc
      .tuple(
        fc.array(backendMessage, { maxLength: 8 }),
        fc.array(fc.tuple(fc.nat(), fc.nat(255)), { maxLength: 4 }),
      )
      .map(([messages, writes]) => {
        const stream = Buffer.concat(messages.map(({ type, body }) => message(type, body)));
        for (const [at, value] of writes) if (stream.length > 0) stream[at % stream.length] = value;
        return stream;
      });
    fc.assert(
      fc.property(
        fc.oneof(
          corrupted,
          fc.uint8Array({ maxLength: 300 }).map((bytes) => Buffer.from(bytes)),
        ),
        cuts,
        (stream, cutPoints) => {
          const framed = frame(split(stream, cutPoints));
          expect(framed.invalidCount).toBeLessThanOrEqual(1);
          expect(framed.afterInvalid).toBe(false);
          expect(framed.bytes.equals(stream.subarray(0, framed.bytes.length))).toBe(true);
          const rest = stream.subarray(framed.bytes.length);
          if (framed.invalidCount === 1) {
            // It stopped at a whole header whose length no message can have.
            expect(rest.length).toBeGreaterThanOrEqual(5);
            expect(rest.readInt32BE(1)).toBeLessThan(4);
          } else if (rest.length >= 5) {
            // What is left is one message not yet whole.
            expect(rest.readInt32BE(1) + 1).toBeGreaterThan(rest.length);
          }
        },
      ),
      fuzzParameters(1000),
    );
  });

  it('buffers a message claiming 2^31 - 1 bytes only as far as its bytes arrive', () => {
    const header = Buffer.from([0x64, 0x7f, 0xff, 0xff, 0xff]);
    const reads = [
      header.subarray(0, 3),
      header.subarray(3),
      ...Array.from({ length: 16 }, () => Buffer.alloc(65_536, 1)),
    ];
    let handedOver = 0;
    const framer = new BackendFramer({
      copyData: () => {
        handedOver++;
        return true;
      },
      other: () => handedOver++,
      invalid: () => handedOver++,
    });
    const allocated = countBufferAllocations(() => {
      for (const read of reads) framer.push(read);
    });
    expect(allocated.error).toBeUndefined();
    expect(handedOver).toBe(0);
    // Each read is copied once; nothing is sized by the claimed length.
    expect(allocated.largest).toBeLessThanOrEqual(65_536);
    expect(allocated.total).toBeLessThanOrEqual(5 + 5 + 16 * 65_536);
  });
});

/** XLogData: 'w', walStart, walEnd, sendTime, then the WAL data. */
function xlogData(
  walStart: bigint,
  walEnd: bigint,
  sendTimePostgresMicros: bigint,
  data: Uint8Array,
): Buffer {
  const header = Buffer.alloc(25);
  header[0] = 0x77;
  header.writeBigUInt64BE(walStart, 1);
  header.writeBigUInt64BE(walEnd, 9);
  header.writeBigInt64BE(sendTimePostgresMicros, 17);
  return Buffer.concat([header, data]);
}

/** Primary keepalive: 'k', walEnd, sendTime, reply requested. */
function keepalive(walEnd: bigint, sendTimePostgresMicros: bigint, reply: number): Buffer {
  const payload = Buffer.alloc(18);
  payload[0] = 0x6b;
  payload.writeBigUInt64BE(walEnd, 1);
  payload.writeBigInt64BE(sendTimePostgresMicros, 9);
  payload[17] = reply;
  return payload;
}

const lsn = fc.bigInt({ min: 0n, max: 2n ** 64n - 1n });
const postgresMicros = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n });

describe('replication messages, generated payloads', () => {
  it('parses every XLogData and keepalive back to its fields, the data in place (1000 cases)', () => {
    fc.assert(
      fc.property(
        lsn,
        lsn,
        postgresMicros,
        fc.uint8Array({ maxLength: 40 }),
        fc.nat(255),
        fc.nat(8),
        (walStart, walEnd, sendTime, data, reply, offset) => {
          const xlog = Buffer.concat([Buffer.alloc(offset), xlogData(walStart, walEnd, sendTime, data)]);
          expect(parseReplicationMessage(xlog, offset)).toEqual({
            tag: 'xlogData',
            walStart,
            walEnd,
            payload: xlog,
            dataStart: offset + 25,
            dataEnd: xlog.length,
          });
          expect(parseReplicationMessage(keepalive(walEnd, sendTime, reply))).toEqual({
            tag: 'keepalive',
            walEnd,
            serverTimeMicros: sendTime + postgresEpochUnixMicros,
            replyRequested: reply !== 0,
          });
        },
      ),
      fuzzParameters(1000),
    );
  });

  it('reads any framed payload as ReplicationStream does: a message or a decode error, nothing else (2000 cases)', () => {
    const payload = fc.oneof(
      fc.uint8Array({ maxLength: 60 }).map((bytes) => Buffer.from(bytes)),
      fc
        .tuple(fc.constantFrom(0x77, 0x6b), fc.uint8Array({ maxLength: 80 }))
        .map(([tag, rest]) => Buffer.concat([Buffer.from([tag]), rest])),
      // XLogData around bytes that start like a pgoutput message.
      fc
        .tuple(lsn, fc.constantFrom(...'BCORYIUDTMS'), fc.uint8Array({ maxLength: 60 }))
        .map(([walStart, tag, rest]) =>
          xlogData(walStart, walStart, 0n, Buffer.concat([Buffer.from(tag), rest])),
        ),
    );
    fc.assert(
      fc.property(fc.array(payload, { maxLength: 6 }), cuts, (payloads, cutPoints) => {
        const stream = Buffer.concat(payloads.map((body) => message(0x64, body)));
        let decoded = 0;
        const framer = new BackendFramer({
          copyData: (data, start, end) => {
            try {
              const parsed = parseReplicationMessage(data, start, end);
              if (parsed.tag === 'xlogData') decodePgoutput(parsed.payload, parsed.dataStart, parsed.dataEnd);
              decoded++;
            } catch (error) {
              expect(error).toBeInstanceOf(EngineError);
              expect((error as EngineError).kind).toBe('decode');
            }
            return true;
          },
          other: () => {
            throw new Error('only CopyData was sent');
          },
          invalid: (error) => {
            throw error;
          },
        });
        for (const read of split(stream, cutPoints)) framer.push(read);
        expect(decoded).toBeLessThanOrEqual(payloads.length);
      }),
      fuzzParameters(2000),
    );
  });
});

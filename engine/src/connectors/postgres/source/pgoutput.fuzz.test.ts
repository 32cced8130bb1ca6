// Properties of the pgoutput decoder over generated input (docs/security.md,
// "Fuzzing"): the bytes are the source server's, so a malformed message must
// fail as a PgoutputDecodeError (an EngineError of kind decode), never as a
// RangeError or TypeError, never by allocating what a length field claims.
// https://www.postgresql.org/docs/current/protocol-logicalrep-message-formats.html
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { countBufferAllocations, fuzzParameters } from '../../../../../test/support/fuzz.ts';
import { tupleData } from '../../../../../test/support/wire-tuple.ts';
import { EngineError } from '../../../errors.ts';
import type { Row, TupleCell } from '../../records.ts';
import { unchangedToast } from '../../records.ts';
import { decodePgoutput, PgoutputDecodeError, type PgoutputMessage } from './pgoutput.ts';
import { postgresEpochUnixMicros } from './replication-messages.ts';

/** The decoder's tuple slab (pgoutput.ts): the one allocation not sized by the message. */
const tupleSlabBytes = 64 * 1024;

/** A message as the decoder should return it, rows as their cells. */
type Expected = Record<string, unknown> & { readonly tag: PgoutputMessage['tag'] };

interface Sample {
  readonly bytes: Buffer;
  readonly expected: Expected;
}

/** Test-only writer of pgoutput fields, big-endian as the server writes them. */
function fields(...parts: (Buffer | string)[]): Buffer {
  return Buffer.concat(parts.map((part) => (typeof part === 'string' ? Buffer.from(part, 'latin1') : part)));
}
const u8 = (value: number) => Buffer.from([value]);
const u16 = (value: number) => {
  const buffer = Buffer.alloc(2);
  buffer.writeUInt16BE(value);
  return buffer;
};
const u32 = (value: number) => {
  const buffer = Buffer.alloc(4);
  buffer.writeUInt32BE(value);
  return buffer;
};
const i32 = (value: number) => {
  const buffer = Buffer.alloc(4);
  buffer.writeInt32BE(value);
  return buffer;
};
const u64 = (value: bigint) => {
  const buffer = Buffer.alloc(8);
  buffer.writeBigUInt64BE(value);
  return buffer;
};
const timestamp = (unixMicros: bigint) => {
  const buffer = Buffer.alloc(8);
  buffer.writeBigInt64BE(unixMicros - postgresEpochUnixMicros);
  return buffer;
};
const cstring = (text: string) => Buffer.concat([Buffer.from(text, 'utf8'), u8(0)]);

const lsn = fc.bigInt({ min: 0n, max: 2n ** 64n - 1n });
const commitTime = fc
  .bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n })
  .map((postgresMicros) => postgresMicros + postgresEpochUnixMicros);
const oid = fc.integer({ min: 0, max: 0xffff_ffff });
/** Names as the server sends them: UTF-8 without NUL. */
const name = fc.string({ unit: 'binary', maxLength: 12 }).map((text) => text.replaceAll('\0', ''));
const cell: fc.Arbitrary<TupleCell> = fc.oneof(
  fc.constant(null),
  fc.constant(unchangedToast),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc.uint8Array({ maxLength: 12 }).map((bytes) => Buffer.from(bytes)),
);
const cells = fc.array(cell, { maxLength: 8 });

const identities = { default: 'd', nothing: 'n', full: 'f', index: 'i' } as const;

/** Every message the decoder reads, with what it should decode to. */
const sample: fc.Arbitrary<Sample> = fc.oneof(
  fc.record({ finalLsn: lsn, commitTimeMicros: commitTime, xid: oid }).map(
    (m): Sample => ({
      bytes: fields('B', u64(m.finalLsn), timestamp(m.commitTimeMicros), u32(m.xid)),
      expected: { tag: 'begin', ...m },
    }),
  ),
  fc.record({ flags: fc.nat(255), commitLsn: lsn, endLsn: lsn, commitTimeMicros: commitTime }).map(
    (m): Sample => ({
      bytes: fields('C', u8(m.flags), u64(m.commitLsn), u64(m.endLsn), timestamp(m.commitTimeMicros)),
      expected: { tag: 'commit', ...m },
    }),
  ),
  fc.record({ originLsn: lsn, originName: name }).map(
    (m): Sample => ({
      bytes: fields('O', u64(m.originLsn), cstring(m.originName)),
      expected: { tag: 'origin', ...m },
    }),
  ),
  fc
    .record({
      relationId: oid,
      schema: name,
      name,
      replicaIdentity: fc.constantFrom(...(Object.keys(identities) as (keyof typeof identities)[])),
      columns: fc.array(
        fc.record({
          name,
          typeOid: oid,
          typeModifier: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
          isKey: fc.boolean(),
        }),
        { maxLength: 6 },
      ),
    })
    .map(
      (m): Sample => ({
        bytes: fields(
          'R',
          u32(m.relationId),
          cstring(m.schema),
          cstring(m.name),
          identities[m.replicaIdentity],
          u16(m.columns.length),
          ...m.columns.flatMap((column) => [
            u8(column.isKey ? 1 : 0),
            cstring(column.name),
            u32(column.typeOid),
            i32(column.typeModifier),
          ]),
        ),
        expected: { tag: 'relation', ...m },
      }),
    ),
  fc.record({ typeOid: oid, schema: name, name }).map(
    (m): Sample => ({
      bytes: fields('Y', u32(m.typeOid), cstring(m.schema), cstring(m.name)),
      expected: { tag: 'type', ...m },
    }),
  ),
  fc.record({ relationId: oid, newTuple: cells }).map(
    (m): Sample => ({
      bytes: fields('I', u32(m.relationId), 'N', tupleData(m.newTuple)),
      expected: { tag: 'insert', ...m },
    }),
  ),
  fc
    .record({
      relationId: oid,
      before: fc.option(fc.tuple(fc.constantFrom('K', 'O'), cells)),
      newTuple: cells,
    })
    .map(
      ({ relationId, before, newTuple }): Sample => ({
        bytes: fields(
          'U',
          u32(relationId),
          ...(before ? [before[0], tupleData(before[1])] : []),
          'N',
          tupleData(newTuple),
        ),
        expected: {
          tag: 'update',
          relationId,
          ...(before ? { [before[0] === 'K' ? 'keyTuple' : 'oldTuple']: before[1] } : {}),
          newTuple,
        },
      }),
    ),
  fc.record({ relationId: oid, marker: fc.constantFrom('K', 'O'), before: cells }).map(
    (m): Sample => ({
      bytes: fields('D', u32(m.relationId), m.marker, tupleData(m.before)),
      expected: {
        tag: 'delete',
        relationId: m.relationId,
        [m.marker === 'K' ? 'keyTuple' : 'oldTuple']: m.before,
      },
    }),
  ),
  fc.record({ relationIds: fc.array(oid, { maxLength: 6 }), options: fc.nat(255) }).map(
    (m): Sample => ({
      bytes: fields('T', i32(m.relationIds.length), u8(m.options), ...m.relationIds.map(u32)),
      expected: {
        tag: 'truncate',
        relationIds: m.relationIds,
        cascade: (m.options & 1) !== 0,
        restartIdentity: (m.options & 2) !== 0,
      },
    }),
  ),
  fc.record({ flags: fc.nat(255), lsn, prefix: name, content: fc.uint8Array({ maxLength: 40 }) }).map(
    (m): Sample => ({
      bytes: fields(
        'M',
        u8(m.flags),
        u64(m.lsn),
        cstring(m.prefix),
        i32(m.content.length),
        Buffer.from(m.content),
      ),
      expected: {
        tag: 'message',
        transactional: (m.flags & 1) !== 0,
        lsn: m.lsn,
        prefix: m.prefix,
        content: Buffer.from(m.content),
      },
    }),
  ),
);

const rowFields = ['newTuple', 'keyTuple', 'oldTuple'] as const;

/** The decoded message with its rows as their cells: what `Expected` holds. */
function plain(message: PgoutputMessage): Record<string, unknown> {
  const result: Record<string, unknown> = { ...message };
  for (const field of rowFields) {
    const row = (message as Partial<Record<(typeof rowFields)[number], Row>>)[field];
    if (row) result[field] = row.cells();
  }
  return result;
}

/**
 * The outcome of decoding: the message (every row's cells decoded, one by
 * one and at once, so a lazy decode that could fail would fail here) or the
 * decode error. Anything else thrown fails the property.
 */
function decodeOutcome(
  data: Buffer,
  start?: number,
  end?: number,
): { message: Record<string, unknown> } | { error: PgoutputDecodeError } {
  let message: PgoutputMessage;
  try {
    message = decodePgoutput(data, start, end);
  } catch (error) {
    if (!(error instanceof PgoutputDecodeError)) throw error;
    expect(error).toBeInstanceOf(EngineError);
    expect(error.kind).toBe('decode');
    expect(error.offset).toBeGreaterThanOrEqual(0);
    expect(error.offset).toBeLessThanOrEqual((end ?? data.length) - (start ?? 0));
    return { error };
  }
  for (const field of rowFields) {
    const row = (message as Partial<Record<(typeof rowFields)[number], Row>>)[field];
    if (!row) continue;
    for (let index = 0; index < row.width; index++) row.cell(index);
    expect(row.tupleData().cellCount).toBe(row.width);
  }
  return { message: plain(message) };
}

/** A valid message with some of its bytes overwritten: a length, a count, a tag or a marker goes wrong. */
const mutated = fc
  .tuple(
    sample,
    fc.array(fc.tuple(fc.nat(), fc.oneof(fc.nat(255), fc.constantFrom(0x00, 0x7f, 0x80, 0xff))), {
      minLength: 1,
      maxLength: 4,
    }),
  )
  .map(([{ bytes }, writes]) => {
    const copy = Buffer.from(bytes);
    for (const [at, value] of writes) copy[at % copy.length] = value;
    return copy;
  });

/** Bytes with a known tag byte first, so the decoder's message branches are reached. */
const randomMessage = fc
  .tuple(fc.constantFrom(...'BCORYIUDTMSEcApbPKrZ'), fc.uint8Array({ maxLength: 200 }))
  .map(([tag, rest]) => fields(tag, Buffer.from(rest)));

describe('pgoutput decoder, generated input', () => {
  it('decodes every message it is given back to its fields (1000 cases)', () => {
    fc.assert(
      fc.property(sample, ({ bytes, expected }) => {
        expect(decodeOutcome(bytes)).toEqual({ message: expected });
      }),
      fuzzParameters(1000),
    );
  });

  it('refuses every strict prefix and every extension of a message with a decode error (500 cases)', () => {
    fc.assert(
      fc.property(
        sample,
        fc.nat(),
        fc.uint8Array({ minLength: 1, maxLength: 8 }),
        ({ bytes }, cut, extra) => {
          const prefix = bytes.subarray(0, cut % bytes.length);
          expect(decodeOutcome(prefix)).toHaveProperty('error');
          expect(decodeOutcome(Buffer.concat([bytes, extra]))).toHaveProperty('error');
        },
      ),
      fuzzParameters(500),
    );
  });

  it('reads only bytes [start, end): the same outcome inside a larger buffer (500 cases)', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          sample.map((s) => s.bytes),
          mutated,
        ),
        fc.uint8Array({ maxLength: 16 }),
        fc.uint8Array({ maxLength: 16 }),
        (bytes, before, after) => {
          const alone = decodeOutcome(bytes);
          const inside = decodeOutcome(
            Buffer.concat([before, bytes, after]),
            before.length,
            before.length + bytes.length,
          );
          if ('error' in alone) expect('error' in inside && inside.error.message).toBe(alone.error.message);
          else expect(inside).toEqual(alone);
        },
      ),
      fuzzParameters(500),
    );
  });

  it('returns a message or a decode error for mutated and random bytes, allocating no more than it was given (2000 cases)', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          mutated,
          randomMessage,
          fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
        ),
        (bytes) => {
          const allocated = countBufferAllocations(() => decodeOutcome(bytes));
          if (allocated.error !== undefined) throw allocated.error;
          expect(allocated.largest).toBeLessThanOrEqual(Math.max(bytes.length, tupleSlabBytes));
        },
      ),
      fuzzParameters(2000),
    );
  });

  it('does not allocate what a length or count field claims (2^31 - 1) but fails as truncated', () => {
    const claims = [
      // An Insert whose one text cell claims 2^31 - 1 bytes.
      fields('I', u32(1), 'N', u16(1), 't', i32(0x7fff_ffff), 'abc'),
      // A binary cell, in the old image of a Delete.
      fields('D', u32(1), 'O', u16(1), 'b', i32(0x7fff_ffff)),
      // A tuple of 65535 cells, three given.
      fields('I', u32(1), 'N', u16(0xffff), 'nnn'),
      // A logical decoding message whose content claims 2^31 - 1 bytes.
      fields('M', u8(1), u64(1n), cstring('p'), i32(0x7fff_ffff), 'abc'),
      // A Truncate of 2^31 - 1 relations, one given.
      fields('T', i32(0x7fff_ffff), u8(0), u32(16384)),
      // A Relation of 65535 columns, none given.
      fields('R', u32(1), cstring('public'), cstring('t'), 'd', u16(0xffff)),
    ];
    for (const bytes of claims) {
      const allocated = countBufferAllocations(() => decodePgoutput(bytes));
      expect(allocated.error).toBeInstanceOf(PgoutputDecodeError);
      expect((allocated.error as Error).message).toMatch(/truncated|missing NUL/);
      expect(allocated.largest).toBeLessThanOrEqual(tupleSlabBytes);
    }
    // A negative length is refused as such.
    expect(() => decodePgoutput(fields('I', u32(1), 'N', u16(1), 't', i32(-1)))).toThrow(/negative length/);
  });
});

import { describe, expect, it } from 'vitest';
import { seededRandom as random } from '../../../../../test/support/seeded-random.ts';
import { tupleData } from '../../../../../test/support/wire-tuple.ts';
import { isUnchangedToast, type TupleCell, unchangedToast } from '../../records.ts';
import { TupleDataRow } from '../../rows.ts';
import { decodePgoutput, PgoutputDecodeError, type PgoutputMessage } from './pgoutput.ts';
import { postgresEpochUnixMicros } from './replication-messages.ts';

/** Test-only encoder: writes pgoutput fields big-endian, as the server does. */
class Encoder {
  readonly #parts: Buffer[] = [];

  #fixed(size: number, write: (buffer: Buffer) => void): this {
    const buffer = Buffer.alloc(size);
    write(buffer);
    this.#parts.push(buffer);
    return this;
  }

  char(text: string): this {
    return this.raw(Buffer.from(text, 'latin1'));
  }
  int8(value: number): this {
    return this.#fixed(1, (b) => b.writeUInt8(value));
  }
  int16(value: number): this {
    return this.#fixed(2, (b) => b.writeUInt16BE(value));
  }
  int32(value: number): this {
    return this.#fixed(4, (b) => b.writeInt32BE(value));
  }
  uint32(value: number): this {
    return this.#fixed(4, (b) => b.writeUInt32BE(value));
  }
  lsn(value: bigint): this {
    return this.#fixed(8, (b) => b.writeBigUInt64BE(value));
  }
  timestamp(unixMicros: bigint): this {
    return this.#fixed(8, (b) => b.writeBigInt64BE(unixMicros - postgresEpochUnixMicros));
  }
  cstring(text: string): this {
    return this.raw(Buffer.from(text, 'utf8')).int8(0);
  }
  raw(bytes: Buffer): this {
    this.#parts.push(bytes);
    return this;
  }
  tuple(cells: readonly TupleCell[]): this {
    return this.raw(tupleData(cells));
  }
  build(): Buffer {
    return Buffer.concat(this.#parts);
  }
}

const encode = () => new Encoder();
const highLsn = 0x1_0000_0000n + 0xabcd_ef01n; // above 2^32
const topLsn = 0xffff_ffff_ffff_fff0n; // above 2^63
const commitTime = 1_718_000_000_123_456n; // 2024-06-10, microseconds since the Unix epoch
const rowCells: TupleCell[] = [
  null,
  unchangedToast,
  'héllo ✓',
  '',
  Buffer.from([0, 1, 0xff]),
  Buffer.alloc(0),
];

const samples = {
  begin: encode().char('B').lsn(topLsn).timestamp(commitTime).uint32(0xffff_fffe).build(),
  commit: encode()
    .char('C')
    .int8(0)
    .lsn(highLsn)
    .lsn(highLsn + 8n)
    .timestamp(commitTime)
    .build(),
  origin: encode().char('O').lsn(highLsn).cstring('node_b').build(),
  relation: encode()
    .char('R')
    .uint32(0x8000_0001)
    .cstring('public')
    .cstring('ørders')
    .char('d')
    .int16(3)
    .int8(1)
    .cstring('id')
    .uint32(20)
    .int32(-1)
    .int8(0)
    .cstring('price')
    .uint32(1700)
    .int32(655366)
    .int8(0)
    .cstring('tag')
    .uint32(0xffff_fff0)
    .int32(-1)
    .build(),
  type: encode().char('Y').uint32(16_385).cstring('public').cstring('mood').build(),
  insert: encode().char('I').uint32(16_384).char('N').tuple(rowCells).build(),
  updateNew: encode().char('U').uint32(16_384).char('N').tuple(['1', 'b']).build(),
  updateKey: encode()
    .char('U')
    .uint32(16_384)
    .char('K')
    .tuple(['1', null])
    .char('N')
    .tuple(['2', 'b'])
    .build(),
  updateOld: encode()
    .char('U')
    .uint32(16_384)
    .char('O')
    .tuple(['1', 'a'])
    .char('N')
    .tuple(['1', unchangedToast])
    .build(),
  deleteKey: encode().char('D').uint32(16_384).char('K').tuple(['1', null]).build(),
  deleteOld: encode().char('D').uint32(16_384).char('O').tuple(['1', 'a']).build(),
  truncate: encode().char('T').int32(2).int8(3).uint32(16_384).uint32(0xffff_ffff).build(),
  message: encode()
    .char('M')
    .int8(1)
    .lsn(highLsn)
    .cstring('tributary')
    .int32(3)
    .raw(Buffer.from('abc'))
    .build(),
} satisfies Record<string, Buffer>;

function decodeError(data: Buffer): PgoutputDecodeError {
  try {
    decodePgoutput(data);
  } catch (error) {
    expect(error).toBeInstanceOf(PgoutputDecodeError);
    expect((error as PgoutputDecodeError).kind).toBe('decode');
    return error as PgoutputDecodeError;
  }
  throw new Error(`expected a PgoutputDecodeError for ${data.toString('hex')}`);
}

describe('decodePgoutput', () => {
  it('decodes Begin with an LSN above 2^63, the commit time and an xid above 2^31', () => {
    expect(decodePgoutput(samples.begin)).toEqual({
      tag: 'begin',
      finalLsn: topLsn,
      commitTimeMicros: commitTime,
      xid: 0xffff_fffe,
    });
  });

  it('converts commit times before 2000-01-01 too', () => {
    const before2000 = 631_152_000_000_001n; // 1990-01-01T00:00:00.000001Z
    const data = encode().char('B').lsn(1n).timestamp(before2000).uint32(1).build();
    expect(decodePgoutput(data)).toMatchObject({ commitTimeMicros: before2000 });
  });

  it('decodes Commit', () => {
    expect(decodePgoutput(samples.commit)).toEqual({
      tag: 'commit',
      flags: 0,
      commitLsn: highLsn,
      endLsn: highLsn + 8n,
      commitTimeMicros: commitTime,
    });
  });

  it('decodes Origin', () => {
    expect(decodePgoutput(samples.origin)).toEqual({
      tag: 'origin',
      originLsn: highLsn,
      originName: 'node_b',
    });
  });

  it('decodes Relation with unsigned OIDs, type modifiers and key flags', () => {
    expect(decodePgoutput(samples.relation)).toEqual({
      tag: 'relation',
      relationId: 0x8000_0001,
      schema: 'public',
      name: 'ørders',
      replicaIdentity: 'default',
      columns: [
        { name: 'id', typeOid: 20, typeModifier: -1, isKey: true },
        { name: 'price', typeOid: 1700, typeModifier: 655366, isKey: false },
        { name: 'tag', typeOid: 0xffff_fff0, typeModifier: -1, isKey: false },
      ],
    });
  });

  it.each([
    ['d', 'default'],
    ['n', 'nothing'],
    ['f', 'full'],
    ['i', 'index'],
  ])('decodes replica identity %s as %s', (setting, replicaIdentity) => {
    const data = encode().char('R').uint32(1).cstring('').cstring('t').char(setting).int16(0).build();
    expect(decodePgoutput(data)).toEqual({
      tag: 'relation',
      relationId: 1,
      schema: '',
      name: 't',
      replicaIdentity,
      columns: [],
    });
  });

  it('decodes Type', () => {
    expect(decodePgoutput(samples.type)).toEqual({
      tag: 'type',
      typeOid: 16_385,
      schema: 'public',
      name: 'mood',
    });
  });

  it('decodes Insert with every tuple column kind', () => {
    const message = decodePgoutput(samples.insert);
    if (message.tag !== 'insert') throw new Error('unreachable');
    expect(message.relationId).toBe(16_384);
    expect(message.newTuple.cells()).toEqual(rowCells);
    const [nullCell, toastCell, text, emptyText, binary] = message.newTuple.cells();
    expect(nullCell).toBeNull();
    expect(toastCell).toBe(unchangedToast);
    expect(isUnchangedToast(toastCell ?? null)).toBe(true);
    expect(isUnchangedToast(nullCell ?? null)).toBe(false);
    expect(isUnchangedToast(text ?? null)).toBe(false);
    expect(text).toBe('héllo ✓');
    expect(emptyText).toBe('');
    expect(Buffer.isBuffer(binary)).toBe(true);
  });

  it('returns binary cells that are copies, so the input buffer can be reused', () => {
    const data = encode()
      .char('I')
      .uint32(1)
      .char('N')
      .tuple([Buffer.from([7, 8])])
      .build();
    const insert = decodePgoutput(data);
    const emitted = encode()
      .char('M')
      .int8(0)
      .lsn(5n)
      .cstring('p')
      .int32(2)
      .raw(Buffer.from([1, 2]))
      .build();
    const message = decodePgoutput(emitted);
    if (insert.tag !== 'insert' || message.tag !== 'message') throw new Error('unreachable');
    data.fill(9);
    emitted.fill(9);
    expect(insert.newTuple.cells()[0]).toEqual(Buffer.from([7, 8]));
    expect(message.content).toEqual(Buffer.from([1, 2]));
  });

  it('keeps the tuple of an insert undecoded, as its bytes copied out of the message', () => {
    const cells = ['1', null, 'two\tthree'];
    const data = encode().char('I').uint32(1).char('N').tuple(cells).build();
    const message = decodePgoutput(data);
    if (message.tag !== 'insert' || !(message.newTuple instanceof TupleDataRow))
      throw new Error('expected a wire tuple');
    const tuple = message.newTuple;
    expect(tuple.cellCount).toBe(3);
    // The TupleData: the message without its tag, relation id and marker.
    expect(tuple.bytes).toEqual(data.subarray(6));
    data.fill(0);
    expect(tuple.cells()).toEqual(cells);
    expect(tuple.cells()).toBe(tuple.cells());
  });

  it('keeps every tuple its own bytes when the messages come in one reused buffer, small and large', () => {
    // Tuples share slabs of copies: enough rows to fill several, and one larger than a slab's share.
    const rows = Array.from({ length: 3000 }, (_, id) => [
      String(id),
      id === 1500 ? 'x'.repeat(20_000) : `v${id}`,
    ]);
    const reused = Buffer.alloc(32 * 1024);
    const tuples = rows.map((cells) => {
      const data = encode().char('I').uint32(1).char('N').tuple(cells).build();
      data.copy(reused);
      const message = decodePgoutput(reused.subarray(0, data.length));
      reused.fill(0);
      if (message.tag !== 'insert' || !(message.newTuple instanceof TupleDataRow))
        throw new Error('expected a wire tuple');
      expect(message.newTuple.bytes).toEqual(data.subarray(6));
      return message.newTuple;
    });
    expect(tuples.map((tuple) => tuple.cells())).toEqual(rows);
  });

  it('decodes ASCII and multi-byte text cells of one tuple alike, each its own value', () => {
    const cells = ['plain', 'héllo ✓', 'a much longer plain ascii value of the row', '', '日本語', 'x'];
    const data = encode().char('I').uint32(1).char('N').tuple(cells).build();
    const message = decodePgoutput(data);
    if (message.tag !== 'insert') throw new Error('unreachable');
    expect(message.newTuple.cells()).toEqual(cells);
    // A value never aliases the input: changing the buffer changes no decoded text.
    data.fill(0x41, 8);
    expect(message.newTuple.cells()).toEqual(cells);
  });

  it('decodes a message in place from an offset, naming errors from its start', () => {
    const header = Buffer.from('header bytes!');
    for (const [name, sample] of Object.entries(samples)) {
      expect(decodePgoutput(Buffer.concat([header, sample]), header.length), name).toEqual(
        decodePgoutput(sample),
      );
    }
    const cut = Buffer.concat([header, samples.begin.subarray(0, 12)]);
    expect(() => decodePgoutput(cut, header.length)).toThrow(
      'pgoutput Begin message at byte 9: truncated: needs 8 bytes, 3 left',
    );
  });

  it('decodes an Insert of zero columns', () => {
    const data = encode().char('I').uint32(1).char('N').tuple([]).build();
    const message = decodePgoutput(data);
    if (message.tag !== 'insert') throw new Error('unreachable');
    expect(message.newTuple.cells()).toEqual([]);
  });

  it('decodes the three forms of Update', () => {
    const updateNew = decodePgoutput(samples.updateNew);
    if (updateNew.tag !== 'update') throw new Error('expected an update');
    // The new row comes undecoded, as an insert's.
    expect(updateNew.newTuple.fromSourceBytes).toBe(true);
    expect(updateNew.newTuple.cells()).toEqual(['1', 'b']);
    expect(Object.keys(updateNew).sort()).toEqual(['newTuple', 'relationId', 'tag']);
    const updateKey = decodePgoutput(samples.updateKey);
    expect({ ...updateKey, newTuple: updateKey.tag === 'update' && updateKey.newTuple.cells() }).toEqual({
      tag: 'update',
      relationId: 16_384,
      keyTuple: ['1', null],
      newTuple: ['2', 'b'],
    });
    const updateOld = decodePgoutput(samples.updateOld);
    expect({ ...updateOld, newTuple: updateOld.tag === 'update' && updateOld.newTuple.cells() }).toEqual({
      tag: 'update',
      relationId: 16_384,
      oldTuple: ['1', 'a'],
      newTuple: ['1', unchangedToast],
    });
  });

  it('decodes both forms of Delete', () => {
    expect(decodePgoutput(samples.deleteKey)).toEqual({
      tag: 'delete',
      relationId: 16_384,
      keyTuple: ['1', null],
    });
    expect(decodePgoutput(samples.deleteOld)).toEqual({
      tag: 'delete',
      relationId: 16_384,
      oldTuple: ['1', 'a'],
    });
  });

  it.each([
    [0, false, false],
    [1, true, false],
    [2, false, true],
    [3, true, true],
  ])('decodes Truncate with options %i', (options, cascade, restartIdentity) => {
    const data = encode().char('T').int32(1).int8(options).uint32(42).build();
    expect(decodePgoutput(data)).toEqual({ tag: 'truncate', relationIds: [42], cascade, restartIdentity });
  });

  it('decodes Truncate of several relations with unsigned OIDs', () => {
    expect(decodePgoutput(samples.truncate)).toEqual({
      tag: 'truncate',
      relationIds: [16_384, 0xffff_ffff],
      cascade: true,
      restartIdentity: true,
    });
  });

  it('decodes transactional and non-transactional logical decoding messages', () => {
    expect(decodePgoutput(samples.message)).toEqual({
      tag: 'message',
      transactional: true,
      lsn: highLsn,
      prefix: 'tributary',
      content: Buffer.from('abc'),
    });
    const plain = encode().char('M').int8(0).lsn(topLsn).cstring('p').int32(0).build();
    expect(decodePgoutput(plain)).toEqual({
      tag: 'message',
      transactional: false,
      lsn: topLsn,
      prefix: 'p',
      content: Buffer.alloc(0),
    });
  });
});

describe('decodePgoutput on malformed input', () => {
  it('refuses an empty buffer', () => {
    expect(decodeError(Buffer.alloc(0))).toMatchObject({ messageType: 'unknown', offset: 0 });
  });

  it.each([0x00, 0x5a, 0xff])('refuses unknown tag 0x%s', (tag) => {
    const error = decodeError(Buffer.from([tag, 0, 0, 0, 0]));
    expect(error.message).toContain(`0x${tag.toString(16).padStart(2, '0')}`);
  });

  it.each([
    ['S', 'Stream Start'],
    ['E', 'Stream Stop'],
    ['c', 'Stream Commit'],
    ['A', 'Stream Abort'],
    ['b', 'Begin Prepare'],
    ['P', 'Prepare'],
    ['K', 'Commit Prepared'],
    ['r', 'Rollback Prepared'],
    ['p', 'Stream Prepare'],
  ])('refuses protocol 2+ message %s (%s)', (tag, messageType) => {
    const error = decodeError(encode().char(tag).uint32(1).int8(1).build());
    expect(error.messageType).toBe(messageType);
    expect(error.message).toMatch(/not supported/);
  });

  it('throws on every truncated prefix of every sample, naming the message type', () => {
    for (const [name, sample] of Object.entries(samples)) {
      decodePgoutput(sample); // the whole sample is valid
      for (let length = 0; length < sample.length; length++) {
        const error = decodeError(sample.subarray(0, length));
        expect(error.offset, `${name} cut at ${length}`).toBeLessThanOrEqual(length);
        if (length > 0) expect(error.messageType).not.toBe('unknown');
      }
    }
  });

  it('throws on trailing bytes after every sample', () => {
    for (const sample of Object.values(samples)) {
      const error = decodeError(Buffer.concat([sample, Buffer.from([0])]));
      expect(error.offset).toBe(sample.length);
      expect(error.message).toMatch(/trailing bytes/);
    }
  });

  it('decodes a message between others in one buffer (a socket read) as it decodes it alone', () => {
    const before = Buffer.from('bytes before');
    // 0xff bytes after: read past the message end, they would be a cell or a truncation error's data.
    const after = Buffer.alloc(64, 0xff);
    for (const [name, sample] of Object.entries(samples)) {
      const read = Buffer.concat([before, sample, after]);
      const end = before.length + sample.length;
      expect(decodePgoutput(read, before.length, end), name).toEqual(decodePgoutput(sample));
      // The bytes after the message are not part of it: a cut message is still truncated.
      expect(() => decodePgoutput(read, before.length, end - 1), name).toThrow(PgoutputDecodeError);
    }
  });

  it('names the message type and byte offset of a truncation', () => {
    const error = decodeError(samples.begin.subarray(0, 12));
    expect(error).toMatchObject({ messageType: 'Begin', offset: 9, kind: 'decode' });
    expect(error.message).toBe('pgoutput Begin message at byte 9: truncated: needs 8 bytes, 3 left');
  });

  it('refuses an unknown tuple column kind', () => {
    const data = encode().char('I').uint32(1).char('N').int16(2).char('n').char('x').build();
    expect(decodeError(data)).toMatchObject({ messageType: 'Insert', offset: 9 });
  });

  it('refuses an unknown replica identity', () => {
    const data = encode().char('R').uint32(1).cstring('s').cstring('t').char('x').int16(0).build();
    expect(decodeError(data)).toMatchObject({ messageType: 'Relation', offset: 9 });
  });

  it('refuses wrong tuple markers', () => {
    const tuple = encode().tuple(['1']).build();
    expect(decodeError(encode().char('I').uint32(1).char('K').raw(tuple).build()).offset).toBe(5);
    expect(decodeError(encode().char('U').uint32(1).char('X').raw(tuple).build()).offset).toBe(5);
    const keyThenOld = encode().char('U').uint32(1).char('K').raw(tuple).char('O').raw(tuple).build();
    expect(decodeError(keyThenOld).offset).toBe(6 + tuple.length);
    expect(decodeError(encode().char('D').uint32(1).char('N').raw(tuple).build()).offset).toBe(5);
  });

  it('refuses lengths past the end', () => {
    const text = encode().char('I').uint32(1).char('N').int16(1).char('t').int32(10).raw(Buffer.from('abc'));
    expect(decodeError(text.build())).toMatchObject({ offset: 13 });
    const binary = encode().char('I').uint32(1).char('N').int16(1).char('b').int32(4).raw(Buffer.from('ab'));
    expect(decodeError(binary.build())).toMatchObject({ offset: 13 });
    const content = encode().char('M').int8(0).lsn(1n).cstring('p').int32(5).raw(Buffer.from('ab'));
    expect(decodeError(content.build())).toMatchObject({ messageType: 'Message', offset: 16 });
    const relations = encode().char('T').int32(3).int8(0).uint32(1);
    expect(decodeError(relations.build())).toMatchObject({ messageType: 'Truncate', offset: 10 });
  });

  it('refuses negative lengths', () => {
    const text = encode().char('I').uint32(1).char('N').int16(1).char('t').int32(-1).build();
    expect(decodeError(text).message).toMatch(/at byte 9: negative length/);
    expect(decodeError(encode().char('T').int32(-1).int8(0).build()).offset).toBe(1);
  });

  it('refuses strings without a NUL terminator', () => {
    const origin = encode().char('O').lsn(1n).raw(Buffer.from('name')).build();
    expect(decodeError(origin)).toMatchObject({ messageType: 'Origin', offset: 9 });
    expect(decodeError(origin).message).toMatch(/missing NUL terminator/);
    const type = encode().char('Y').uint32(1).cstring('public').raw(Buffer.from('mood')).build();
    expect(decodeError(type)).toMatchObject({ messageType: 'Type', offset: 12 });
  });

  it('never quotes row data in its message', () => {
    const secret = 'secret-row-value';
    const textCell = encode().char('t').int32(secret.length).raw(Buffer.from(secret)).build();
    const insert = () => encode().char('I').uint32(1).char('N');
    const unknownKind = insert().int16(2).raw(textCell).char('?').build();
    expect(decodeError(unknownKind).offset).toBe(8 + textCell.length);
    const truncated = insert().int16(1).char('t').int32(64).raw(Buffer.from(secret)).build();
    const trailing = insert().int16(1).raw(textCell).raw(Buffer.from(secret)).build();
    for (const data of [unknownKind, truncated, trailing]) {
      expect(decodeError(data).message).not.toContain('secret');
    }
  });
});

describe('decodePgoutput on random input', () => {
  const tags = new Set<PgoutputMessage['tag']>([
    'begin',
    'commit',
    'origin',
    'relation',
    'type',
    'insert',
    'update',
    'delete',
    'truncate',
    'message',
  ]);

  function expectMessageOrDecodeError(data: Buffer): void {
    try {
      expect(tags.has(decodePgoutput(data).tag)).toBe(true);
    } catch (error) {
      if (!(error instanceof PgoutputDecodeError)) {
        throw new Error(`unexpected error for ${data.toString('hex')}`, { cause: error });
      }
    }
  }

  it('yields only messages or PgoutputDecodeError for random bytes after a real tag', () => {
    const next = random(0x7269_6275);
    const tagBytes = Buffer.from('BCORYIUDTMSEcAZ', 'latin1');
    for (let i = 0; i < 3000; i++) {
      const data = Buffer.alloc(1 + Math.floor(next() * 48));
      for (let j = 0; j < data.length; j++) data[j] = Math.floor(next() * 256);
      data[0] = tagBytes[Math.floor(next() * tagBytes.length)] ?? 0;
      expectMessageOrDecodeError(data);
    }
  });

  it('yields only messages or PgoutputDecodeError for mutated samples', () => {
    const next = random(0x7461_7279);
    const sampleList = Object.values(samples);
    for (let i = 0; i < 5000; i++) {
      const sample = sampleList[Math.floor(next() * sampleList.length)] ?? samples.begin;
      const data = Buffer.from(sample);
      const flips = 1 + Math.floor(next() * 3);
      for (let j = 0; j < flips; j++) data[Math.floor(next() * data.length)] = Math.floor(next() * 256);
      const cut = next() < 0.2 ? Math.floor(next() * (data.length + 1)) : data.length;
      expectMessageOrDecodeError(data.subarray(0, cut));
    }
  });
});

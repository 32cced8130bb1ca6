import { describe, expect, it } from 'vitest';
import { BackendFramer } from './backend-framer.ts';

/** One backend message: type byte, Int32 length (itself included), body. */
function message(type: string, body: string | Buffer): Buffer {
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  const header = Buffer.alloc(5);
  header.write(type, 0, 'latin1');
  header.writeInt32BE(bytes.length + 4, 1);
  return Buffer.concat([header, bytes]);
}

type Seen = { copy: string } | { other: string };

/**
 * Pushes `reads` through a framer and records what each handler got: CopyData
 * payloads as text, other messages' bytes as hex (consecutive runs joined, as
 * pg's parser reads a stream and not runs). `takesCopy` decides per payload.
 */
function frame(reads: readonly Buffer[], takesCopy: (payload: string) => boolean = () => true) {
  const seen: Seen[] = [];
  const invalid: Error[] = [];
  const framer = new BackendFramer({
    copyData: (data, start, end) => {
      const payload = data.toString('latin1', start, end);
      if (!takesCopy(payload)) return false;
      seen.push({ copy: payload });
      return true;
    },
    other: (messages) => {
      const last = seen.at(-1);
      if (last && 'other' in last) last.other += messages.toString('hex');
      else seen.push({ other: messages.toString('hex') });
    },
    invalid: (error) => invalid.push(error),
  });
  for (const read of reads) {
    framer.push(read);
    // The framer must not keep a view of a read: the socket's buffer is not its own.
    read.fill(0);
  }
  return { seen, invalid };
}

const copies = (payloads: readonly string[]) => payloads.map((payload) => message('d', payload));
const stream = Buffer.concat([
  message('W', Buffer.from([0, 0, 0])),
  ...copies(['w-first', 'w-second']),
  message('N', 'notice'),
  message('E', 'error'),
  ...copies(['k', 'w-third with a longer body to split many ways']),
  message('c', ''),
  message('C', 'COPY 0\0'),
  message('Z', 'I'),
]);
const expected: Seen[] = [
  { other: message('W', Buffer.from([0, 0, 0])).toString('hex') },
  { copy: 'w-first' },
  { copy: 'w-second' },
  { other: Buffer.concat([message('N', 'notice'), message('E', 'error')]).toString('hex') },
  { copy: 'k' },
  { copy: 'w-third with a longer body to split many ways' },
  { other: Buffer.concat([message('c', ''), message('C', 'COPY 0\0'), message('Z', 'I')]).toString('hex') },
];

describe('BackendFramer', () => {
  it('hands CopyData payloads over in place and other messages on in runs, in order', () => {
    const { seen, invalid } = frame([Buffer.from(stream)]);
    expect(seen).toEqual(expected);
    expect(invalid).toEqual([]);
  });

  it('frames the same whatever reads the stream comes in: split at every byte, or a byte a read', () => {
    for (let split = 1; split < stream.length; split++) {
      const reads = [Buffer.from(stream.subarray(0, split)), Buffer.from(stream.subarray(split))];
      expect(frame(reads).seen, `split at ${split}`).toEqual(expected);
    }
    const bytes = [...stream].map((byte) => Buffer.from([byte]));
    expect(frame(bytes).seen).toEqual(expected);
  });

  it('joins a message that spans many reads once it is whole', () => {
    const body = 'x'.repeat(200_000);
    const whole = Buffer.concat([message('d', body), message('d', 'after')]);
    const reads: Buffer[] = [];
    for (let offset = 0; offset < whole.length; offset += 65_536)
      reads.push(Buffer.from(whole.subarray(offset, offset + 65_536)));
    expect(frame(reads).seen).toEqual([{ copy: body }, { copy: 'after' }]);
  });

  it('leaves a CopyData message it is not to take to the other messages, in its place', () => {
    // As before a copy starts: the decision may follow from a message just before it.
    let started = false;
    const reads = [Buffer.concat([...copies(['early']), message('W', ''), ...copies(['late'])])];
    const framer = new BackendFramer({
      copyData: (data, start, end) => {
        if (!started) return false;
        expect(data.toString('latin1', start, end)).toBe('late');
        return true;
      },
      other: (messages) => {
        if (messages.includes(message('W', ''))) started = true;
      },
      invalid: (error) => {
        throw error;
      },
    });
    for (const read of reads) framer.push(read);
    expect(started).toBe(true);

    const { seen } = frame(reads, (payload) => payload !== 'early');
    expect(seen).toEqual([
      { other: Buffer.concat([message('d', 'early'), message('W', '')]).toString('hex') },
      { copy: 'late' },
    ]);
  });

  it('stops at a length no message can have, after handing over what came before it', () => {
    const bad = Buffer.from([0x64, 0, 0, 0, 3, 0x41]);
    const { seen, invalid } = frame([
      Buffer.concat([message('N', 'before'), ...copies(['ok']), bad, ...copies(['never'])]),
      Buffer.from(copies(['never either'])[0] as Buffer),
    ]);
    expect(seen).toEqual([{ other: message('N', 'before').toString('hex') }, { copy: 'ok' }]);
    expect(invalid.map((error) => error.message)).toEqual(['server message with invalid length 3']);
  });

  it('stops at an invalid length split across reads too', () => {
    const bad = Buffer.from([0x64, 0xff, 0xff, 0xff, 0xff]);
    const { seen, invalid } = frame([bad.subarray(0, 2), bad.subarray(2), ...copies(['never'])]);
    expect(seen).toEqual([]);
    expect(invalid).toHaveLength(1);
  });
});

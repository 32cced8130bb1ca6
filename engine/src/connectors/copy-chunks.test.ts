import { describe, expect, it } from 'vitest';
import { CopyTextChunks } from './copy-chunks.ts';

const lines = (count: number) =>
  Array.from({ length: count }, (_, index) => `${index}\tnote ${'x'.repeat(index % 7)}\n`);

function chunked(input: readonly string[], chunkBytes: number): CopyTextChunks {
  const text = new CopyTextChunks(chunkBytes);
  for (const line of input) text.add(line);
  return text;
}

describe('CopyTextChunks', () => {
  it('keeps every line, in order, byte for byte', () => {
    const input = lines(10_000);
    const chunks = chunked(input, 1024).chunks();
    expect(Buffer.concat(chunks).toString('utf8')).toBe(input.join(''));
  });

  it('cuts only at line ends, each chunk at least the size asked for but the last', () => {
    const chunks = chunked(lines(10_000), 1024)
      .chunks()
      .map((chunk) => chunk.toString('utf8'));
    expect(chunks.length).toBeGreaterThan(1);
    for (const chunk of chunks) expect(chunk.endsWith('\n')).toBe(true);
    for (const chunk of chunks.slice(0, -1)) {
      expect(chunk.length).toBeGreaterThanOrEqual(1024);
      // Never more than one line past the size.
      expect(chunk.length).toBeLessThan(1024 + 20);
    }
  });

  it('counts characters, and encodes what is beyond ASCII as UTF-8', () => {
    const input = ['é\t☃\n', '𝄞\n'];
    expect(Buffer.concat(chunked(input, 1).chunks()).toString('utf8')).toBe(input.join(''));
  });

  it('holds nothing for no lines', () => {
    expect(chunked([], 1024).chunks()).toEqual([]);
  });

  it('numbers the first line of each chunk, and seals the lines added since when read again', () => {
    const input = lines(1_000);
    const text = chunked(input, 1024);
    const chunks = text.chunks();
    expect(text.firstLines).toHaveLength(chunks.length);
    let line = 0;
    for (const [index, chunk] of chunks.entries()) {
      expect(text.firstLines[index]).toBe(line);
      line += chunk.toString('utf8').split('\n').length - 1;
    }
    text.add('late\n');
    expect(text.chunks().at(-1)?.toString('utf8')).toBe('late\n');
    expect(text.firstLines.at(-1)).toBe(1_000);
  });

  describe('lines written as bytes (addWritten)', () => {
    const write = (line: string) => (target: Buffer, offset: number) =>
      offset + target.write(line, offset, 'utf8');

    it('keeps them in order with lines added as strings, each chunk ending on a line end', () => {
      const text = new CopyTextChunks(64);
      const input = lines(300).map((line, index) => (index % 3 === 0 ? `é${line}` : line));
      for (const [index, line] of input.entries()) {
        if (index % 7 < 4)
          expect(text.addWritten(Buffer.byteLength(line), write(line))).toBe(Buffer.byteLength(line));
        else text.add(line);
      }
      const chunks = text.chunks();
      expect(Buffer.concat(chunks).toString('utf8')).toBe(input.join(''));
      for (const chunk of chunks) expect(chunk.toString('utf8').endsWith('\n')).toBe(true);
      let line = 0;
      for (const [index, chunk] of chunks.entries()) {
        expect(text.firstLines[index]).toBe(line);
        line += chunk.toString('utf8').split('\n').length - 1;
      }
      expect(line).toBe(300);
    });

    it('gives a line longer than a chunk a chunk of its own, and fills chunks up to their size', () => {
      const text = new CopyTextChunks(16);
      const long = `${'x'.repeat(40)}\n`;
      text.addWritten(5, write('abcd\n'));
      text.addWritten(41, write(long));
      for (let index = 0; index < 8; index++) text.addWritten(5, write('wxyz\n'));
      const chunks = text.chunks().map((chunk) => chunk.toString('utf8'));
      expect(chunks[0]).toBe('abcd\n');
      expect(chunks[1]).toBe(long);
      expect(chunks.slice(2)).toEqual(['wxyz\n'.repeat(3), 'wxyz\n'.repeat(3), 'wxyz\n'.repeat(2)]);
    });

    it('asks no more room than a line may take: the bytes written are those returned', () => {
      const text = new CopyTextChunks(1024);
      // Room for 10 bytes, 4 written.
      expect(text.addWritten(10, write('abc\n'))).toBe(4);
      expect(Buffer.concat(text.chunks()).toString('utf8')).toBe('abc\n');
    });
  });
});

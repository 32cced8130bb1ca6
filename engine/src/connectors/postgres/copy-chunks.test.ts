import { describe, expect, it } from 'vitest';
import { copyChunks } from './copy-chunks.ts';

const lines = (count: number) =>
  Array.from({ length: count }, (_, index) => `${index}\tnote ${'x'.repeat(index % 7)}\n`);

describe('copyChunks', () => {
  it('keeps every line, in order, byte for byte', () => {
    const input = lines(10_000);
    const chunks = [...copyChunks(input, 1024)];
    expect(Buffer.concat(chunks).toString('utf8')).toBe(input.join(''));
  });

  it('cuts only at line ends, each chunk at least the size asked for but the last', () => {
    const chunks = [...copyChunks(lines(10_000), 1024)].map((chunk) => chunk.toString('utf8'));
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
    expect(Buffer.concat([...copyChunks(input, 1)]).toString('utf8')).toBe(input.join(''));
  });

  it('yields nothing for no lines', () => {
    expect([...copyChunks([])]).toEqual([]);
  });

  it('pulls lines lazily, one chunk ahead at most', () => {
    let pulled = 0;
    function* counted() {
      for (const line of lines(1_000)) {
        pulled++;
        yield line;
      }
    }
    const iterator = copyChunks(counted(), 100);
    iterator.next();
    expect(pulled).toBeLessThan(20);
  });
});

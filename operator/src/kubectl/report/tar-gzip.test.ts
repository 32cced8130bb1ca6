import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tarGzip } from './tar-gzip.ts';

describe('the .tar.gz of a support bundle', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tributary-tar-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('is read back by tar, long paths and sizes on block boundaries included', () => {
    const long = `bundle/${'engine-pod-with-a-long-name-'.repeat(4)}0/${'x'.repeat(60)}.log`;
    const entries = [
      { path: 'bundle/README.txt', content: 'hello\n' },
      { path: 'bundle/empty.txt', content: '' },
      { path: 'bundle/block.txt', content: 'b'.repeat(512) },
      { path: long, content: 'ünïcode\n' },
    ];
    const archive = join(dir, 'bundle.tar.gz');
    writeFileSync(archive, tarGzip(entries, new Date('2024-05-01T10:00:00Z')));
    const listed = execFileSync('tar', ['-tzvf', archive], { encoding: 'utf8' });
    expect(listed).toContain('2024-05-01');
    execFileSync('tar', ['-xzf', archive, '-C', dir]);
    for (const entry of entries) expect(readFileSync(join(dir, entry.path), 'utf8')).toBe(entry.content);
  });

  it('refuses a path ustar cannot hold', () => {
    expect(() => tarGzip([{ path: 'x'.repeat(101), content: '' }], new Date())).toThrow(RangeError);
  });
});

import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { secureDataDirectory } from './data-dir.ts';

const modeOf = (path: string) => statSync(path).mode & 0o777;

describe('secureDataDirectory', () => {
  const roots: string[] = [];
  afterEach(() => {
    for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
  });

  it('tightens existing directories and files, and leaves a symbolic link target alone', () => {
    const root = mkdtempSync(join(tmpdir(), 'data-dir-'));
    roots.push(root);
    const data = join(root, 'data');
    const outside = join(root, 'outside.txt');
    mkdirSync(join(data, 'base'), { recursive: true, mode: 0o755 });
    writeFileSync(join(data, 'base', 'file'), 'x', { mode: 0o644 });
    writeFileSync(outside, 'x', { mode: 0o644 });
    chmodSync(data, 0o755);
    chmodSync(outside, 0o644);
    symlinkSync(outside, join(data, 'link'));
    expect(secureDataDirectory(data)).toBe(3);
    expect([modeOf(data), modeOf(join(data, 'base')), modeOf(join(data, 'base', 'file'))]).toEqual([
      0o700, 0o700, 0o600,
    ]);
    expect(modeOf(outside)).toBe(0o644);
    expect(secureDataDirectory(data)).toBe(0);
  });

  it('creates a missing directory as 0700', () => {
    const root = mkdtempSync(join(tmpdir(), 'data-dir-'));
    roots.push(root);
    secureDataDirectory(join(root, 'a', 'b'));
    expect(modeOf(join(root, 'a', 'b'))).toBe(0o700);
  });
});

// The standalone data directory holds peer passwords: its modes are put right at
// every start, not only when it is created (a restore or a copy loosens them).
import { chmodSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type StandaloneProcess, startStandalone } from '../support/standalone-process.ts';

const password = 'standalone-data-dir-password';
const modeOf = (path: string) => statSync(path).mode & 0o777;

describe('standalone data directory', () => {
  const root = mkdtempSync(join(tmpdir(), 'tributary-data-dir-'));
  const dataDir = join(root, 'data');
  let service: StandaloneProcess | undefined;

  afterAll(async () => {
    await service?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  it('is 0700 with 0600 files after a start, even when loosened before it', async () => {
    service = await startStandalone(dataDir, password);
    await service.stop();
    service = undefined;
    expect(modeOf(dataDir)).toBe(0o700);

    const file = join(dataDir, 'PG_VERSION');
    const subdirectory = join(dataDir, 'global');
    chmodSync(dataDir, 0o755);
    chmodSync(file, 0o644);
    chmodSync(subdirectory, 0o755);
    expect(modeOf(file)).toBe(0o644);

    const logLines: string[] = [];
    service = await startStandalone(dataDir, password, { logLines });
    expect(modeOf(dataDir)).toBe(0o700);
    expect(modeOf(file)).toBe(0o600);
    expect(modeOf(subdirectory)).toBe(0o700);
    expect(logLines.some((line) => line.includes('data directory was readable by others'))).toBe(true);
  });
});

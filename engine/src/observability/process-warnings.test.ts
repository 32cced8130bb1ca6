import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const here = import.meta.dirname;

/** Runs `body` in a fresh Node process with a JSON process logger on stdout; returns its output. */
function runNode(body: string) {
  const script = `
    import { createProcessLogger } from ${JSON.stringify(join(here, 'logger.ts'))};
    import { logProcessWarnings } from ${JSON.stringify(join(here, 'process-warnings.ts'))};
    const logger = createProcessLogger({ level: 'info', format: 'json', base: { role: 'test' } });
    ${body}
  `;
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  expect(result.status, result.stderr).toBe(0);
  return { stdout: result.stdout, stderr: result.stderr };
}

const warningsIn = (stdout: string) =>
  stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as { level: number; msg: string; warning?: Record<string, string> });

describe('logProcessWarnings', () => {
  it('writes a process warning as a JSON warn line instead of Node printing it on stderr', () => {
    const { stdout, stderr } = runNode(`
      logProcessWarnings(logger);
      process.emitWarning('a library said something', { type: 'ExampleWarning', code: 'EX001' });
      setTimeout(() => {}, -5); // Node 24: TimeoutNegativeWarning, as a library's timer may trigger
      await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
    `);
    expect(stderr).toBe('');
    const lines = warningsIn(stdout);
    expect(lines).toEqual([
      expect.objectContaining({
        level: 40,
        role: 'test',
        msg: 'process warning: ExampleWarning',
        warning: { name: 'ExampleWarning', code: 'EX001', message: 'a library said something' },
      }),
      expect.objectContaining({
        level: 40,
        msg: 'process warning: TimeoutNegativeWarning',
        warning: expect.objectContaining({ name: 'TimeoutNegativeWarning' }),
      }),
    ]);
  });

  it('leaves Node printing warnings where it is not called (the check above can fail)', () => {
    const { stdout, stderr } = runNode(`
      process.emitWarning('a library said something', { type: 'ExampleWarning' });
      await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
    `);
    expect(stdout).toBe('');
    expect(stderr).toContain('ExampleWarning: a library said something');
  });
});

import { describe, expect, it } from 'vitest';
import { EngineError } from '../errors.ts';
import { Heartbeats, heartbeatRefused } from './heartbeats.ts';

function recorder(outcomes: (Error | undefined)[]) {
  const lines: string[] = [];
  const counts: boolean[] = [];
  const heartbeats = new Heartbeats({
    intervalMs: 0,
    emit: async () => {
      const outcome = outcomes.shift();
      if (outcome) throw outcome;
      return 1n;
    },
    log: (level, message) => lines.push(`${level} ${message}`),
    counted: (written) => counts.push(written),
  });
  return { heartbeats, lines, counts };
}

describe('Heartbeats', () => {
  it('counts what it writes and says nothing while it works', async () => {
    const { heartbeats, lines, counts } = recorder([undefined, undefined]);
    await heartbeats.beat();
    await heartbeats.beat();
    expect(counts).toEqual([true, true]);
    expect(lines).toEqual([]);
  });

  it('warns once for a run of refusals, never throws, and says when they work again', async () => {
    const denied = new EngineError('permission', 'permission denied for function pg_logical_emit_message');
    const { heartbeats, lines, counts } = recorder([denied, denied, denied, undefined, denied]);
    for (let beat = 0; beat < 5; beat++) await heartbeats.beat();
    expect(counts).toEqual([false, false, false, true, false]);
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^WARN cannot write a heartbeat to the source \(permission denied/);
    expect(lines[0]).toContain('grant EXECUTE on the function pg_logical_emit_message');
    expect(lines[1]).toBe('INFO heartbeats are written to the source again');
    expect(lines[2]).toMatch(/^WARN cannot write a heartbeat/);
  });

  it('writes one heartbeat at a time', async () => {
    let release: () => void = () => {};
    let calls = 0;
    const heartbeats = new Heartbeats({
      intervalMs: 0,
      emit: () => {
        calls++;
        return new Promise<void>((resolve) => {
          release = resolve;
        });
      },
      log: () => undefined,
    });
    const first = heartbeats.beat();
    const second = heartbeats.beat();
    expect(second).toBe(first);
    release();
    await heartbeats.stop();
    expect(calls).toBe(1);
  });

  it('writes none with an interval of 0', async () => {
    const { heartbeats, counts } = recorder([]);
    heartbeats.start();
    await heartbeats.stop();
    expect(counts).toEqual([]);
  });

  it('names the way out for a standby or another refusal', () => {
    const message = heartbeatRefused(
      new EngineError('source_setup', 'cannot execute pg_logical_emit_message() during recovery'),
    );
    expect(message).toContain('a standby cannot be written to');
    expect(message).toContain('heartbeatIntervalSeconds');
  });
});

import { describe, expect, it } from 'vitest';
import { ProgressWatchdog, type StallReport, stallAfterMsFromEnvironment } from './progress-watchdog.ts';

function watchdogAt(stallAfterMs: number) {
  let now = 1_000_000;
  const stalls: StallReport[] = [];
  const resumes: { report: StallReport; stalledMs: number }[] = [];
  const watchdog = new ProgressWatchdog({
    stallAfterMs,
    now: () => now,
    onStall: (report) => stalls.push(report),
    onResume: (report, stalledMs) => resumes.push({ report, stalledMs }),
  });
  return {
    watchdog,
    stalls,
    resumes,
    advance(ms: number) {
      now += ms;
      watchdog.check();
    },
  };
}

describe('progress watchdog', () => {
  it('reports a step without progress past the bound once, with when it last moved', () => {
    const { watchdog, stalls, advance } = watchdogAt(1_000);
    const step = watchdog.begin('initial load: destination: write public.t partition 1 of 1');
    advance(600);
    step.progressed();
    advance(999);
    expect(stalls).toEqual([]);
    advance(1);
    advance(5_000);
    expect(stalls).toEqual([
      { step: 'initial load: destination: write public.t partition 1 of 1', since: new Date(1_000_600) },
    ]);
    watchdog.stop();
  });

  it('reports the end of a stall when the step moves again or ends', () => {
    const { watchdog, stalls, resumes, advance } = watchdogAt(1_000);
    const step = watchdog.begin('a');
    advance(1_500);
    step.progressed();
    advance(0);
    expect(resumes).toEqual([{ report: stalls[0], stalledMs: 1_500 }]);
    advance(1_000);
    expect(stalls).toHaveLength(2);
    step.end();
    expect(resumes).toHaveLength(2);
    watchdog.stop();
  });

  it('arms nothing while no step runs: an idle mirror never stalls', async () => {
    const { watchdog, stalls, advance } = watchdogAt(1_000);
    await watchdog.watch('quick', async () => {});
    advance(10_000);
    expect(stalls).toEqual([]);
  });

  it('names the step that has waited longest among concurrent ones', () => {
    const { watchdog, stalls, advance } = watchdogAt(1_000);
    const first = watchdog.begin('partition 1');
    advance(500);
    const second = watchdog.begin('partition 2');
    advance(600);
    expect(stalls.map((report) => report.step)).toEqual(['partition 1']);
    first.end();
    second.end();
  });

  it('reads its bound from TRIBUTARY_STALL_SECONDS, and refuses a bad one by name', () => {
    expect(stallAfterMsFromEnvironment({})).toBe(300_000);
    expect(stallAfterMsFromEnvironment({ TRIBUTARY_STALL_SECONDS: '2.5' })).toBe(2_500);
    expect(() => stallAfterMsFromEnvironment({ TRIBUTARY_STALL_SECONDS: '-1' })).toThrow(
      'TRIBUTARY_STALL_SECONDS must be a positive number of seconds',
    );
  });
});

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mirrorPhases } from './catalog.ts';
import { canTransition, type PhaseOrigin, phasesLeadingTo, phaseTransitions } from './phases.ts';

function documentedTransitions(): Record<string, string[]> {
  const doc = readFileSync(
    join(import.meta.dirname, '..', '..', '..', 'docs', 'mirror-lifecycle.md'),
    'utf8',
  );
  const section = doc.slice(doc.indexOf('## Transitions'));
  const table: Record<string, string[]> = {};
  for (const line of section.split('\n')) {
    const cells = line.split('|').map((cell) => cell.trim());
    // A table row reads ['', from, to, ''].
    if (cells.length !== 4 || !/^\w+$/.test(cells[1] ?? '') || cells[1] === 'from') continue;
    table[cells[1] ?? ''] = (cells[2] ?? '').split(',').map((phase) => phase.trim());
  }
  return table;
}

describe('mirror lifecycle', () => {
  it('matches the table in docs/mirror-lifecycle.md', () => {
    expect(documentedTransitions()).toEqual(phaseTransitions);
  });

  it('lets every phase be left, except by dropping or finishing, and reached', () => {
    for (const phase of mirrorPhases) {
      expect(phasesLeadingTo(phase).length).toBeGreaterThan(0);
      if (phase !== 'terminated')
        expect(canTransition(phase, 'terminating') || phase === 'terminating').toBe(true);
    }
  });

  it('lets a fault that needs a person fail the mirror from every phase an engine starts or runs in', () => {
    // A resume starts the engine in `paused`, a retry in `failed`: a `manual`
    // or `never` fault met before the engine moves the phase must still fail it.
    const engineRuns: PhaseOrigin[] = [
      'new',
      'setup',
      'snapshot',
      'running',
      'pausing',
      'paused',
      'failed',
      'terminating',
    ];
    for (const phase of engineRuns) expect(canTransition(phase, 'failed'), phase).toBe(true);
    expect(canTransition('completed', 'failed')).toBe(false);
    expect(canTransition('terminated', 'failed')).toBe(false);
  });

  it('never resumes a dropped mirror or re-runs a completed one', () => {
    expect(canTransition('terminated', 'running')).toBe(false);
    expect(canTransition('completed', 'running')).toBe(false);
    expect(canTransition('paused', 'paused')).toBe(false);
  });
});

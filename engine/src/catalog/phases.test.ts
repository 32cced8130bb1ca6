import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mirrorPhases } from './catalog.ts';
import { canTransition, phasesLeadingTo, phaseTransitions } from './phases.ts';

function documentedTransitions(): Record<string, string[]> {
  const doc = readFileSync(
    join(import.meta.dirname, '..', '..', '..', 'docs', 'mirror-lifecycle.md'),
    'utf8',
  );
  const section = doc.slice(doc.indexOf('## Transitions'));
  const table: Record<string, string[]> = {};
  for (const line of section.split('\n')) {
    const match = /^\| (\w+) \| ([\w, ]+) \|$/.exec(line);
    if (match?.[1] && match[2] && match[1] !== 'from') table[match[1]] = match[2].split(', ');
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

  it('never resumes a dropped mirror or re-runs a completed one', () => {
    expect(canTransition('terminated', 'running')).toBe(false);
    expect(canTransition('completed', 'running')).toBe(false);
    expect(canTransition('paused', 'paused')).toBe(false);
  });
});

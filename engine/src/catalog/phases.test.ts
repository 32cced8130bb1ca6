import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type MirrorPhase, type MirrorRuntime, mirrorPhases } from './catalog.ts';
import { PhaseTransitionError } from './phase-error.ts';
import {
  canTransition,
  forgetDroppedMirror,
  movePhase,
  movePhaseIfAllowed,
  type PhaseOrigin,
  type PhaseRecord,
  phaseEvents,
  phasesLeadingTo,
  phaseTransitions,
} from './phases.ts';

const repositoryDir = join(import.meta.dirname, '..', '..', '..');

/** The rows of the first table after `heading` in docs/mirror-lifecycle.md, as [first cell, second cell]. */
function documentedTable(heading: string): [string, string][] {
  const doc = readFileSync(join(repositoryDir, 'docs', 'mirror-lifecycle.md'), 'utf8');
  const start = doc.indexOf(heading);
  expect(start, heading).toBeGreaterThanOrEqual(0);
  const rows: [string, string][] = [];
  for (const line of doc.slice(start + heading.length).split('\n')) {
    if (!line.startsWith('|')) {
      if (rows.length > 0) break;
      continue;
    }
    // A table row reads ['', first, second, …, ''].
    const cells = line.split('|').map((cell) => cell.trim().replaceAll('`', ''));
    const [first = '', second = ''] = cells.slice(1);
    if (!/^\w+$/.test(first)) continue;
    rows.push([first, second]);
  }
  return rows.slice(1);
}

function documentedTransitions(): Record<string, string[]> {
  return Object.fromEntries(
    documentedTable('## Transitions').map(([from, to]) => [from, to.split(',').map((phase) => phase.trim())]),
  );
}

/**
 * A catalog's runtime record in memory, moved as PostgresCatalog.transition
 * moves it (the integration test walks the real one): refused moves throw.
 */
class MemoryPhaseRecord implements PhaseRecord {
  readonly phases = new Map<string, { phase: MirrorPhase; errorMessage: string | null }>();

  async getRuntime(mirror: string): Promise<MirrorRuntime | undefined> {
    const stored = this.phases.get(mirror);
    return stored ? ({ mirror, ...stored } as MirrorRuntime) : undefined;
  }

  async transition(mirror: string, phase: MirrorPhase, errorMessage: string | null = null) {
    const from = this.phases.get(mirror)?.phase ?? 'new';
    if (!canTransition(from, phase)) throw new PhaseTransitionError(mirror, from, phase);
    this.phases.set(mirror, { phase, errorMessage });
  }

  async startNewIncarnation(mirror: string): Promise<boolean> {
    if (this.phases.get(mirror)?.phase !== 'terminated') return false;
    return this.phases.delete(mirror);
  }
}

/** Every TypeScript file of the three packages and bin/, tests left out. */
function productionFiles(): string[] {
  return ['engine/src', 'api-server/src', 'operator/src', 'bin'].flatMap((folder) =>
    readdirSync(join(repositoryDir, folder), { recursive: true, encoding: 'utf8' })
      .filter((name) => name.endsWith('.ts') && !name.endsWith('.test.ts'))
      .map((name) => join(repositoryDir, folder, name)),
  );
}

describe('mirror lifecycle', () => {
  it('matches the transition table in docs/mirror-lifecycle.md', () => {
    expect(documentedTransitions()).toEqual(phaseTransitions);
  });

  it('matches the events in docs/mirror-lifecycle.md', () => {
    expect(Object.fromEntries(documentedTable('### Events'))).toEqual(phaseEvents);
  });

  it('lets every phase be left, except by dropping or finishing, and reached', () => {
    for (const phase of mirrorPhases) {
      expect(phasesLeadingTo(phase).length).toBeGreaterThan(0);
      if (phase !== 'terminated')
        expect(canTransition(phase, 'terminating') || phase === 'terminating').toBe(true);
    }
  });

  it('has an event for every phase', () => {
    expect(new Set(Object.values(phaseEvents))).toEqual(new Set(mirrorPhases));
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

describe('the phase writer', () => {
  it('walks a mirror through its life by events', async () => {
    const record = new MemoryPhaseRecord();
    const seen: (MirrorPhase | undefined)[] = [];
    const events = [
      'setupStarted',
      'loadStarted',
      'streamingStarted',
      'pauseRequested',
      'engineStoppedForPause',
      'streamingStarted',
      'dropStarted',
      'dropFinished',
    ] as const;
    for (const event of events) {
      await movePhase(record, 'm', event);
      seen.push((await record.getRuntime('m'))?.phase);
    }
    expect(seen).toEqual(events.map((event) => phaseEvents[event]));
    expect(await forgetDroppedMirror(record, 'm')).toBe(true);
    expect(await record.getRuntime('m')).toBeUndefined();
  });

  it('refuses a move the table forbids and leaves the phase', async () => {
    const record = new MemoryPhaseRecord();
    await movePhase(record, 'm', 'setupStarted');
    await movePhase(record, 'm', 'loadStarted');
    await movePhase(record, 'm', 'loadOnlyFinished');
    await expect(movePhase(record, 'm', 'streamingStarted')).rejects.toBeInstanceOf(PhaseTransitionError);
    expect((await record.getRuntime('m'))?.phase).toBe('completed');
    expect(await forgetDroppedMirror(record, 'm')).toBe(false);
  });

  it('moves only when allowed, and says whether it moved', async () => {
    const record = new MemoryPhaseRecord();
    // Nothing to pause yet (new → pausing is not a move); a failure is recorded from anywhere an engine runs.
    expect(await movePhaseIfAllowed(record, 'm', 'engineStoppedForPause')).toBe(false);
    expect(await movePhaseIfAllowed(record, 'm', 'failedForGood', 'source peer p is not relational')).toBe(
      true,
    );
    expect(await record.getRuntime('m')).toMatchObject({
      phase: 'failed',
      errorMessage: 'source peer p is not relational',
    });
    expect(await movePhaseIfAllowed(record, 'm', 'pauseRequested')).toBe(true);
    expect(await movePhaseIfAllowed(record, 'm', 'pauseRequested')).toBe(false);
    expect(await movePhaseIfAllowed(record, 'm', 'engineStoppedForPause')).toBe(true);
    expect((await record.getRuntime('m'))?.phase).toBe('paused');
  });

  it('is the only writer of the phase', () => {
    const writer = join(repositoryDir, 'engine', 'src', 'catalog', 'phases.ts');
    const writes = /\.(transition|startNewIncarnation)\(/;
    const files = productionFiles();
    expect(files.length).toBeGreaterThan(100);
    const offending = files
      .filter((file) => file !== writer && writes.test(readFileSync(file, 'utf8')))
      .map((file) => relative(repositoryDir, file));
    expect(offending).toEqual([]);
  });
});

// Walks every (from, to) pair of the lifecycle against the real catalog: allowed
// moves happen, refused ones throw and leave the phase as it was.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mirrorPhases } from '../../engine/src/catalog/catalog.ts';
import { PhaseTransitionError } from '../../engine/src/catalog/phase-error.ts';
import { canTransition, type PhaseOrigin, phaseTransitions } from '../../engine/src/catalog/phases.ts';
import { PostgresCatalog } from '../../engine/src/catalog/postgres-catalog.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';

describe('catalog phase transitions', () => {
  let database: TestDatabase;
  let pool: pg.Pool;
  let catalog: PostgresCatalog;

  beforeAll(async () => {
    database = await createTestDatabase('phases');
    pool = new pg.Pool({ ...database.config, max: 2 });
    catalog = new PostgresCatalog(pool);
    await catalog.migrate();
  });

  afterAll(async () => {
    await pool?.end();
    await database?.drop();
  });

  const origins = Object.keys(phaseTransitions) as PhaseOrigin[];
  for (const from of origins) {
    it(`from ${from}`, async () => {
      for (const to of mirrorPhases) {
        const mirror = `m-${from}-${to}`;
        if (from !== 'new') {
          await pool.query(`INSERT INTO tributary.mirror_runtime (mirror, phase) VALUES ($1, $2)`, [
            mirror,
            from,
          ]);
        }
        const attempt = catalog.transition(mirror, to);
        if (canTransition(from, to)) {
          await attempt;
          expect((await catalog.getRuntime(mirror))?.phase).toBe(to);
        } else {
          await expect(attempt).rejects.toBeInstanceOf(PhaseTransitionError);
          expect((await catalog.getRuntime(mirror))?.phase).toBe(from === 'new' ? undefined : from);
        }
      }
    });
  }

  it('forgets the old setup when a dropped mirror is created again', async () => {
    await catalog.transition('reborn', 'setup');
    await catalog.saveSourceSetup('reborn', {
      slotName: 's',
      publicationName: 'p',
      publicationCreatedByMirror: true,
      slotCreatedByMirror: true,
      slotIdentity: null,
    });
    await catalog.setSnapshotCompleted('reborn', true);
    await catalog.transition('reborn', 'terminating');
    await catalog.transition('reborn', 'terminated');
    await catalog.transition('reborn', 'setup');
    const runtime = await catalog.getRuntime('reborn');
    expect(runtime).toMatchObject({ phase: 'setup', setup: null, snapshotCompleted: false });
  });
});

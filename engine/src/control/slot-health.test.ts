import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { Catalog, MirrorRuntime, SlotHealth } from '../catalog/catalog.ts';
import type { SlotReading } from '../connectors/source.ts';
import { EngineError } from '../errors.ts';
import type { SlotHealthSink } from '../observability/slot-health-metrics.ts';
import type { RelationalConfig } from '../resources/peer.ts';
import type { MirrorResource, PeerResource } from './resources.ts';
import {
  type ServerSlotReader,
  SlotHealthMonitor,
  slotHealthIntervalMsFromEnvironment,
  slotHealthOf,
} from './slot-health.ts';
import { PeerSecretsUnavailableError, type ResourceStore } from './store.ts';

const reading = (overrides: Partial<SlotReading> = {}): SlotReading => ({
  active: false,
  walStatus: 'reserved',
  retainedWalBytes: 32n * 1024n * 1024n,
  unconfirmedBytes: 16n * 1024n * 1024n,
  safeWalSizeBytes: null,
  invalidationReason: null,
  conflicting: null,
  ...overrides,
});
const at = new Date('2026-01-01T00:00:00Z');

describe('slotHealthOf', () => {
  it('calls a readable, reserved slot healthy, in any state, with its figures', () => {
    for (const phase of ['running', 'paused', 'failed', 'snapshot'] as const) {
      const health = slotHealthOf('s', phase, reading(), at);
      expect(health).toMatchObject({ healthy: true, reason: 'Healthy', slotName: 's', checkedAt: at });
      expect(health.message).toBe(
        'replication slot s retains 32.0 MiB of WAL, 16.0 MiB not confirmed, inactive',
      );
    }
  });

  it('tells a slot not created yet from one that went missing', () => {
    expect(slotHealthOf('s', undefined, undefined, at)).toMatchObject({
      healthy: null,
      reason: 'SlotNotCreated',
    });
    expect(slotHealthOf('s', 'setup', undefined, at)).toMatchObject({
      healthy: null,
      reason: 'SlotNotCreated',
    });
    const missing = slotHealthOf('s', 'paused', undefined, at);
    expect(missing).toMatchObject({ healthy: false, reason: 'SlotMissing', reading: null });
    expect(missing.message).toContain('replication slot s does not exist');
  });

  it("calls a slot over the mirror's retained WAL limit unhealthy, and one at it healthy", () => {
    const limit = 32 * 1024 * 1024;
    expect(slotHealthOf('s', 'paused', reading(), at, limit)).toMatchObject({ healthy: true });
    const over = slotHealthOf('s', 'paused', reading({ retainedWalBytes: BigInt(limit) + 1n }), at, limit);
    expect(over).toMatchObject({ healthy: false, reason: 'RetainedWalOverLimit' });
    expect(over.message).toContain("over the mirror's limit of 32.0 MiB");
    // Worse news first: an invalidated slot says so whatever it retains.
    expect(
      slotHealthOf(
        's',
        'paused',
        reading({ walStatus: 'lost', retainedWalBytes: BigInt(limit) * 2n }),
        at,
        limit,
      ).reason,
    ).toBe('Invalidated');
  });

  it('calls an invalidated slot so, by each sign the server versions give', () => {
    for (const invalid of [
      reading({ invalidationReason: 'wal_removed', walStatus: 'lost', retainedWalBytes: null }),
      reading({ walStatus: 'lost' }),
      reading({ conflicting: true }),
    ]) {
      expect(slotHealthOf('s', 'paused', invalid, at)).toMatchObject({
        healthy: false,
        reason: 'Invalidated',
      });
    }
    expect(slotHealthOf('s', 'failed', reading({ invalidationReason: 'wal_removed' }), at).message).toContain(
      'wal_removed',
    );
  });

  it('warns of WAL at risk while wal_status is unreserved', () => {
    const risky = slotHealthOf('s', 'paused', reading({ walStatus: 'unreserved' }), at);
    expect(risky).toMatchObject({ healthy: false, reason: 'WalAtRisk' });
    expect(risky.message).toContain('max_slot_wal_keep_size');
  });
});

describe('slotHealthIntervalMsFromEnvironment', () => {
  it('defaults to 30 s, reads seconds and refuses a bad value by name', () => {
    expect(slotHealthIntervalMsFromEnvironment({})).toBe(30_000);
    expect(slotHealthIntervalMsFromEnvironment({ TRIBUTARY_SLOT_HEALTH_SECONDS: '2.5' })).toBe(2_500);
    expect(() => slotHealthIntervalMsFromEnvironment({ TRIBUTARY_SLOT_HEALTH_SECONDS: '0' })).toThrow(
      'TRIBUTARY_SLOT_HEALTH_SECONDS',
    );
  });
});

/** The parts of the store and the catalog the monitor uses, in memory. */
function world() {
  const peers = new Map<string, PeerResource | Error>();
  const mirrors: MirrorResource[] = [];
  const runtimes = new Map<string, MirrorRuntime>();
  const records = new Map<string, SlotHealth>();
  const sunk = new Map<string, SlotHealth>();
  const forgotten: string[] = [];
  const store = {
    listMirrors: async () => [...mirrors],
    getPeer: async (name: string) => {
      const found = peers.get(name);
      if (found instanceof Error) throw found;
      return found;
    },
  } as Partial<ResourceStore> as ResourceStore;
  const catalog = {
    installationId: async () => 'install',
    getRuntime: async (mirror: string) => runtimes.get(mirror),
    recordSlotHealth: async (mirror: string, health: SlotHealth) => {
      records.set(mirror, health);
    },
    keepSlotHealthOf: async (kept: readonly string[]) => {
      for (const mirror of [...records.keys()]) if (!kept.includes(mirror)) records.delete(mirror);
    },
  } as Partial<Catalog> as Catalog;
  const sink: SlotHealthSink = {
    slotHealth: (mirror, health) => sunk.set(mirror, health),
    forgetSlot: (mirror) => {
      sunk.delete(mirror);
      forgotten.push(mirror);
    },
  };
  const addPeer = (name: string, config: Partial<RelationalConfig>) =>
    peers.set(name, {
      peer: {
        name,
        kind: 'relational',
        config: { host: 'db1', port: 5432, user: 'u', password: 'secret-pw', database: name, ...config },
      },
      version: null,
      createdAt: at,
    } as PeerResource);
  const addMirror = (
    name: string,
    sourcePeer: string,
    slotName?: string,
    spec: Partial<MirrorResource['spec']> = {},
  ) =>
    mirrors.push({
      name,
      uid: name,
      spec: {
        sourcePeer,
        destinationPeer: 'dst',
        doInitialSnapshot: true,
        ...(slotName ? { replicationSlotName: slotName } : {}),
        ...spec,
      },
      generation: 1,
      deleting: false,
      failedGeneration: null,
      createdAt: at,
    } as unknown as MirrorResource);
  const setPhase = (mirror: string, phase: MirrorRuntime['phase'], slotName?: string) =>
    runtimes.set(mirror, {
      mirror,
      phase,
      snapshotCompleted: slotName !== undefined,
      setup: slotName ? { slotName } : null,
    } as unknown as MirrorRuntime);
  return { peers, mirrors, records, sunk, forgotten, store, catalog, sink, addPeer, addMirror, setPhase };
}

describe('SlotHealthMonitor', () => {
  const logger = pino({ level: 'silent' });

  it('reads each source server once per round however many mirrors and peers share it', async () => {
    const w = world();
    // Two peers (two databases) on server db1, one on db2; five mirrors.
    w.addPeer('a', { database: 'a' });
    w.addPeer('b', { database: 'b' });
    w.addPeer('c', { host: 'db2' });
    for (const [mirror, peer] of [
      ['m1', 'a'],
      ['m2', 'a'],
      ['m3', 'b'],
      ['m4', 'c'],
      ['m5', 'c'],
    ] as const) {
      w.addMirror(mirror, peer, `slot_${mirror}`);
      w.setPhase(mirror, 'paused', `slot_${mirror}`);
    }
    const reads: { host: string; slots: readonly string[] }[] = [];
    const readServer: ServerSlotReader = async (config, slots) => {
      reads.push({ host: config.host, slots });
      return { serverWalLsn: 1n, slots: new Map(slots.map((slot) => [slot, reading()])) };
    };
    const monitor = new SlotHealthMonitor({ ...w, logger, readServer });
    await monitor.check();
    expect(reads.map((read) => read.host).sort()).toEqual(['db1', 'db2']);
    expect(reads.find((read) => read.host === 'db1')?.slots).toEqual(['slot_m1', 'slot_m2', 'slot_m3']);
    expect([...w.records.keys()].sort()).toEqual(['m1', 'm2', 'm3', 'm4', 'm5']);
    expect([...w.sunk.values()].every((health) => health.reason === 'Healthy')).toBe(true);
    await monitor.check();
    expect(reads).toHaveLength(4);
  });

  it('finds nothing missing for a mirror that failed before its initial load completed', async () => {
    const w = world();
    w.addPeer('a', {});
    w.addMirror('early', 'a');
    w.setPhase('early', 'failed');
    w.addMirror('late', 'a', 'slot_late');
    w.setPhase('late', 'failed', 'slot_late');
    const readServer: ServerSlotReader = async () => ({ serverWalLsn: 1n, slots: new Map() });
    await new SlotHealthMonitor({ ...w, logger, readServer }).check();
    expect(w.records.get('early')).toMatchObject({ healthy: null, reason: 'SlotNotCreated' });
    expect(w.records.get('late')).toMatchObject({ healthy: false, reason: 'SlotMissing' });
  });

  it('never drops a slot over its limit that the mirror did not create, and keeps it unhealthy', async () => {
    const w = world();
    w.addPeer('a', {});
    w.addMirror('adopted', 'a', 'slot_adopted', {
      maxRetainedWalBytes: 1_048_576,
      retainedWalLimitAction: 'DropSlot',
    });
    // The catalog's setup says the mirror did not create its slot (no slotCreatedByMirror).
    w.setPhase('adopted', 'paused', 'slot_adopted');
    const readServer: ServerSlotReader = async (_config, slots) => ({
      serverWalLsn: 1n,
      slots: new Map(slots.map((slot) => [slot, reading({ retainedWalBytes: 8n * 1_048_576n })])),
    });
    const opened: string[] = [];
    const openSource = (_config: RelationalConfig, mirror: string) => {
      opened.push(mirror);
      throw new Error('must not be opened');
    };
    await new SlotHealthMonitor({ ...w, logger, readServer, openSource }).check();
    expect(opened).toEqual([]);
    expect(w.records.get('adopted')).toMatchObject({ healthy: false, reason: 'RetainedWalOverLimit' });
  });

  it('tries the next peer of a server when one cannot read it, and says why when none can', async () => {
    const w = world();
    w.addPeer('wrong', { user: 'wrong' });
    w.addPeer('right', { database: 'other' });
    w.addMirror('m1', 'wrong', 'slot_1');
    w.addMirror('m2', 'right', 'slot_2');
    w.setPhase('m1', 'running', 'slot_1');
    w.setPhase('m2', 'failed', 'slot_2');
    let down = false;
    const users: string[] = [];
    const readServer: ServerSlotReader = async (config, slots) => {
      users.push(config.user);
      if (down || config.user === 'wrong')
        throw new EngineError(
          'source_auth',
          `source: connect to ${config.host}:${config.port}/${config.database}`,
        );
      return { serverWalLsn: 1n, slots: new Map(slots.map((slot) => [slot, reading()])) };
    };
    const monitor = new SlotHealthMonitor({ ...w, logger, readServer });
    await monitor.check();
    expect(users).toEqual(['wrong', 'u']);
    expect(w.records.get('m1')?.reason).toBe('Healthy');
    expect(w.records.get('m2')?.reason).toBe('Healthy');
    down = true;
    await monitor.check();
    const unreachable = w.records.get('m1');
    expect(unreachable).toMatchObject({ healthy: null, reason: 'SourceUnreachable', reading: null });
    expect(unreachable?.message).toContain('db1:5432');
    // Never a secret in what is recorded.
    for (const health of w.records.values())
      expect(JSON.stringify(health, (_, v) => String(v))).not.toContain('secret-pw');
  });

  it('names the slot by the setup record, the spec or the default, and skips finished mirrors', async () => {
    const w = world();
    w.addPeer('a', {});
    w.addMirror('recorded', 'a', 'spec_slot');
    w.setPhase('recorded', 'running', 'recorded_slot');
    w.addMirror('named', 'a', 'spec_slot');
    w.addMirror('defaulted', 'a');
    w.addMirror('done', 'a');
    w.setPhase('done', 'completed');
    let asked: readonly string[] = [];
    const readServer: ServerSlotReader = async (_config, slots) => {
      asked = slots;
      return { serverWalLsn: 1n, slots: new Map() };
    };
    await new SlotHealthMonitor({ ...w, logger, readServer }).check();
    expect(asked[0]).toBe('recorded_slot');
    expect(asked[1]).toBe('spec_slot');
    expect(asked[2]).toMatch(/^tributary_defaulted_[0-9a-f]{8}$/);
    expect(w.records.has('done')).toBe(false);
    // None exists yet, and none of them is past setup but the running one.
    expect(w.records.get('recorded')?.reason).toBe('SlotMissing');
    expect(w.records.get('named')?.reason).toBe('SlotNotCreated');
  });

  it('says nothing of a slot a dropped mirror’s teardown removed', async () => {
    const w = world();
    w.addPeer('a', {});
    w.addMirror('dropping', 'a', 'slot');
    w.setPhase('dropping', 'terminating', 'slot');
    (w.mirrors[0] as { deleting: boolean }).deleting = true;
    const readServer: ServerSlotReader = async () => ({ serverWalLsn: 1n, slots: new Map() });
    await new SlotHealthMonitor({ ...w, logger, readServer }).check();
    expect(w.records.has('dropping')).toBe(false);
  });

  it('waits for a source peer or its Secret, and forgets a mirror once it is gone', async () => {
    const w = world();
    w.peers.set(
      'locked',
      new PeerSecretsUnavailableError('Secret locked-secret of peer locked does not exist'),
    );
    w.addMirror('m1', 'locked');
    w.addMirror('m2', 'absent');
    let reads = 0;
    const readServer: ServerSlotReader = async () => {
      reads++;
      return { serverWalLsn: 1n, slots: new Map() };
    };
    const monitor = new SlotHealthMonitor({ ...w, logger, readServer });
    await monitor.check();
    expect(reads).toBe(0);
    expect(w.records.get('m1')).toMatchObject({ reason: 'WaitingForPeer', healthy: null });
    expect(w.records.get('m1')?.message).toContain('locked-secret');
    expect(w.records.get('m2')?.message).toBe('source peer absent does not exist yet');
    w.mirrors.splice(0, 1);
    await monitor.check();
    expect([...w.records.keys()]).toEqual(['m2']);
    expect(w.forgotten).toEqual(['m1']);
  });

  it('runs one round at a time and stops after the round in progress', async () => {
    const w = world();
    w.addPeer('a', {});
    w.addMirror('m1', 'a', 'slot');
    let reads = 0;
    let release = () => {};
    const readServer: ServerSlotReader = async () => {
      reads++;
      await new Promise<void>((resolve) => {
        release = resolve;
      });
      return { serverWalLsn: 1n, slots: new Map() };
    };
    const monitor = new SlotHealthMonitor({ ...w, logger, readServer, intervalMs: 1_000 });
    monitor.start();
    const second = monitor.check();
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    expect(reads).toBe(1);
    const stopped = monitor.stop();
    release();
    await Promise.all([second, stopped]);
    expect(reads).toBe(1);
    expect(w.records.has('m1')).toBe(true);
  });
});

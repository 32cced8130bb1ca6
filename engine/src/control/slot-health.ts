// Watches every mirror's replication slot on its source, whatever the mirror's
// state (setup, snapshot, running, paused, failed): a paused or failed mirror
// has no engine, and WAL piling up behind its slot is the one failure that
// hurts the source itself. Each round lists the mirrors, resolves their source
// peers and slot names, groups them by source server and reads each server
// once (connectors/postgres/source/slot-health.ts: one connection, one query,
// however many mirrors share the server), then records each mirror's
// SlotHealth in the catalog (its one writer: the Mirror's SlotHealthy
// condition, /api/v1/mirrors/status and the console read it there) and in the
// metrics of the process running the monitor.
//
// It is also the guard beyond the source's own settings: a mirror with
// maxRetainedWalBytes whose slot retains more is unhealthy
// (RetainedWalOverLimit), and with retainedWalLimitAction DropSlot a paused or
// failed one's slot is dropped (never one the mirror did not create) and its
// tables loaded again when it runs, so a forgotten mirror cannot fill the
// source's disk.
//
// Guarantees: rounds never overlap (a slow server delays the next round, it
// does not stack them); a round that fails for one server records the others;
// nothing here throws out of a round (failures are recorded and logged once per
// cause); no log line, record or metric carries a secret (only the server's
// host and port and the classified error's message).
import type { Logger } from 'pino';
import type { Catalog, MirrorPhase, SlotHealth } from '../catalog/catalog.ts';
import { moveTablesIfAllowed } from '../catalog/table-states.ts';
import { classifySlotState } from '../connectors/classify/index.ts';
import { defaultSlotName } from '../connectors/postgres/source/slot.ts';
import { readServerSlots, type ServerSlotReadings } from '../connectors/postgres/source/slot-health.ts';
import { createSource } from '../connectors/registry.ts';
import type { SlotReading, Source } from '../connectors/source.ts';
import { EngineError, isEngineError } from '../errors.ts';
import type { Notifier } from '../observability/notifier.ts';
import type { SlotHealthSink } from '../observability/slot-health-metrics.ts';
import { checkSlotIdentity } from '../pipeline/source-ownership.ts';
import type { RelationalConfig } from '../resources/peer.ts';
import type { MirrorResource } from './resources.ts';
import { PeerSecretsUnavailableError, type ResourceStore } from './store.ts';

/** How often every source is read unless TRIBUTARY_SLOT_HEALTH_SECONDS says otherwise. */
export const defaultSlotHealthIntervalMs = 30_000;

/** TRIBUTARY_SLOT_HEALTH_SECONDS as milliseconds (read once at start-up); throws on an invalid value. */
export function slotHealthIntervalMsFromEnvironment(env: NodeJS.ProcessEnv = process.env): number {
  const text = env.TRIBUTARY_SLOT_HEALTH_SECONDS;
  if (text === undefined || text === '') return defaultSlotHealthIntervalMs;
  const seconds = Number(text);
  if (!Number.isFinite(seconds) || seconds < 1)
    throw new EngineError('config', 'TRIBUTARY_SLOT_HEALTH_SECONDS must be a number of seconds, at least 1');
  return Math.round(seconds * 1000);
}

/** Reads the named slots of one server; the PostgreSQL reader unless a test gives another. */
export type ServerSlotReader = (
  config: RelationalConfig,
  slotNames: readonly string[],
) => Promise<ServerSlotReadings>;

export interface SlotHealthMonitorOptions {
  readonly store: ResourceStore;
  readonly catalog: Catalog;
  readonly logger: Logger;
  /** Told each mirror's health (the process's metrics). */
  readonly sink?: SlotHealthSink | undefined;
  readonly intervalMs?: number;
  readonly readServer?: ServerSlotReader;
  /** Told when the retained WAL limit dropped a slot (slot_dropped). */
  readonly notifier?: Notifier | undefined;
  /** Called once a slot is dropped by its retained WAL limit (the operator records an Event). */
  readonly onSlotDropped?: ((mirror: string, message: string) => Promise<void>) | undefined;
  /** Opens the source to drop a slot; the registry's unless a test gives another. */
  readonly openSource?: (config: RelationalConfig, mirror: string) => Source;
}

const openSource = (config: RelationalConfig, mirror: string): Source =>
  createSource({ kind: 'relational', config }, { mirror });

const mib = (value: bigint) => `${(Number(value) / 1_048_576).toFixed(1)} MiB`;

/**
 * A slot's health from what the read found (`reading` undefined: no slot of
 * that name) and the mirror's phase (a slot not there yet is expected in setup).
 */
export function slotHealthOf(
  slotName: string,
  phase: MirrorPhase | undefined,
  reading: SlotReading | undefined,
  checkedAt: Date,
  /** The mirror's maxRetainedWalBytes, if it has one. */
  retainedWalLimitBytes?: number,
): SlotHealth {
  const health = { slotName, checkedAt, reading: reading ?? null };
  if (!reading) {
    if (phase === undefined || phase === 'setup') {
      return {
        ...health,
        healthy: null,
        reason: 'SlotNotCreated',
        message: `replication slot ${slotName} is not created yet`,
      };
    }
    return {
      ...health,
      healthy: false,
      reason: 'SlotMissing',
      message:
        classifySlotState(slotName, undefined)?.message ?? `replication slot ${slotName} does not exist`,
    };
  }
  const lost = classifySlotState(slotName, reading);
  if (lost) return { ...health, healthy: false, reason: 'Invalidated', message: lost.message };
  const retained =
    reading.retainedWalBytes === null ? '' : `retains ${mib(reading.retainedWalBytes)} of WAL, `;
  if (reading.walStatus === 'unreserved') {
    return {
      ...health,
      healthy: false,
      reason: 'WalAtRisk',
      message: `replication slot ${slotName} ${retained}beyond max_wal_size (wal_status unreserved): the next checkpoint may remove WAL it needs; resume the mirror or raise max_slot_wal_keep_size`,
    };
  }
  if (
    retainedWalLimitBytes !== undefined &&
    reading.retainedWalBytes !== null &&
    reading.retainedWalBytes > BigInt(retainedWalLimitBytes)
  ) {
    return {
      ...health,
      healthy: false,
      reason: 'RetainedWalOverLimit',
      message: `replication slot ${slotName} ${retained}over the mirror's limit of ${mib(BigInt(retainedWalLimitBytes))} (maxRetainedWalBytes): resume the mirror, or drop it if it is no longer needed`,
    };
  }
  const unconfirmed =
    reading.unconfirmedBytes === null ? '' : `${mib(reading.unconfirmedBytes)} not confirmed, `;
  return {
    ...health,
    healthy: true,
    reason: 'Healthy',
    message: `replication slot ${slotName} ${retained}${unconfirmed}${reading.active ? 'active' : 'inactive'}`,
  };
}

/** A mirror to read, with what its slot is called and where its source is. */
interface Watched {
  readonly mirror: string;
  /** Being dropped: its teardown removes the slot, which is then no news. */
  readonly deleting: boolean;
  readonly phase: MirrorPhase | undefined;
  readonly slotName: string;
  readonly source: RelationalConfig;
  readonly retainedWalLimitBytes: number | undefined;
  /** retainedWalLimitAction DropSlot. */
  readonly dropOverLimit: boolean;
}

/** One server, however many peers name it: the tunnel (if any) and the address it reaches. */
function serverKey(config: RelationalConfig): string {
  const ssh = config.sshConfig ? `${config.sshConfig.host}:${config.sshConfig.port}` : '';
  return `${ssh}\u0000${config.host}:${config.port}`;
}

export class SlotHealthMonitor {
  readonly #options: SlotHealthMonitorOptions;
  readonly #readServer: ServerSlotReader;
  readonly #intervalMs: number;
  /** Mirrors given a record in the previous round, to forget those gone since. */
  #reported = new Set<string>();
  /** The last failure logged per server, so a lasting one is logged once. */
  readonly #serverFailures = new Map<string, string>();
  /** The last guard warning logged per mirror. */
  readonly #guardWarnings = new Map<string, string>();
  #timer: NodeJS.Timeout | undefined;
  #round: Promise<void> | undefined;
  #stopped = false;
  #installationId: string | undefined;

  constructor(options: SlotHealthMonitorOptions) {
    this.#options = options;
    this.#readServer = options.readServer ?? ((config, slots) => readServerSlots(config, slots));
    this.#intervalMs = options.intervalMs ?? defaultSlotHealthIntervalMs;
  }

  /** Reads at once, then every interval, until `stop`. */
  start(): void {
    this.#stopped = false;
    const next = () => {
      if (this.#stopped) return;
      this.#timer = setTimeout(() => void this.check().finally(next), this.#intervalMs);
      this.#timer.unref();
    };
    void this.check().finally(next);
  }

  /** Stops the rounds; resolves once a round in progress has ended. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    await this.#round;
  }

  /** One round now (or the one in progress): every mirror's slot read and recorded. */
  check(): Promise<void> {
    this.#round ??= this.#check()
      .catch((error: unknown) => this.#options.logger.warn({ err: error }, 'slot health round failed'))
      .finally(() => {
        this.#round = undefined;
      });
    return this.#round;
  }

  async #check(): Promise<void> {
    const { store, catalog, sink } = this.#options;
    const mirrors = await store.listMirrors();
    this.#installationId ??= await catalog.installationId();
    const installationId = this.#installationId;
    const peers = new Map<string, Promise<RelationalConfig | string>>();
    const sourceOf = (name: string) => {
      let found = peers.get(name);
      if (!found) {
        found = this.#sourceConfig(name);
        peers.set(name, found);
      }
      return found;
    };
    const watched: Watched[] = [];
    const recorded: string[] = [];
    const record = async (mirror: string, health: SlotHealth) => {
      await catalog.recordSlotHealth(mirror, health);
      sink?.slotHealth(mirror, health);
      recorded.push(mirror);
    };
    for (const mirror of mirrors) {
      const runtime = await catalog.getRuntime(mirror.name);
      // A load-only mirror that finished has dropped its slot; a dropped one has nothing left.
      if (runtime?.phase === 'completed' || runtime?.phase === 'terminated') continue;
      const slotName = runtime?.setup?.slotName ?? slotNameOf(mirror, installationId);
      const source = await sourceOf(mirror.spec.sourcePeer);
      if (typeof source === 'string') {
        await record(mirror.name, {
          slotName,
          checkedAt: new Date(),
          healthy: null,
          reason: 'WaitingForPeer',
          message: source,
          reading: null,
        });
        continue;
      }
      watched.push({
        mirror: mirror.name,
        deleting: mirror.deleting,
        // A failed or paused mirror whose initial load is not complete (it
        // failed during it, or its retained WAL limit dropped its slot) has no
        // slot to lose: its next start creates one and loads again (a load's
        // slot dies with the connection exporting its snapshot). Nothing is
        // missing: its SlotHealthy is unknown, as during setup.
        phase:
          (runtime?.phase === 'failed' || runtime?.phase === 'paused') &&
          (!runtime.setup || (mirror.spec.doInitialSnapshot && !runtime.snapshotCompleted))
            ? 'setup'
            : runtime?.phase,
        slotName,
        source,
        retainedWalLimitBytes: mirror.spec.maxRetainedWalBytes,
        dropOverLimit: mirror.spec.retainedWalLimitAction === 'DropSlot',
      });
    }
    const servers = new Map<string, Watched[]>();
    for (const entry of watched) {
      const key = serverKey(entry.source);
      servers.set(key, [...(servers.get(key) ?? []), entry]);
    }
    await Promise.all(
      [...servers].map(async ([key, entries]) => {
        const outcome = await this.#readOneServer(key, entries);
        const checkedAt = new Date();
        for (const entry of entries) {
          const found = typeof outcome === 'string' ? undefined : outcome.slots.get(entry.slotName);
          // A mirror being dropped whose slot is gone: the teardown did its job.
          if (typeof outcome !== 'string' && entry.deleting && !found) continue;
          const health: SlotHealth =
            typeof outcome === 'string'
              ? {
                  slotName: entry.slotName,
                  checkedAt,
                  healthy: null,
                  reason: 'SourceUnreachable',
                  message: outcome,
                  reading: null,
                }
              : slotHealthOf(entry.slotName, entry.phase, found, checkedAt, entry.retainedWalLimitBytes);
          const dropped =
            health.reason === 'RetainedWalOverLimit' && entry.dropOverLimit && !entry.deleting
              ? await this.#dropOverLimit(entry, health)
              : undefined;
          await record(entry.mirror, dropped ?? health);
        }
      }),
    );
    await catalog.keepSlotHealthOf(recorded);
    const now = new Set(recorded);
    for (const mirror of this.#reported) if (!now.has(mirror)) sink?.forgetSlot(mirror);
    this.#reported = now;
  }

  /**
   * Reads a server's slots with the first peer config that works: peers naming
   * one server may differ in user or database, and one peer's wrong password
   * must not hide the other mirrors' slots. Returns the failure's message otherwise.
   */
  async #readOneServer(key: string, entries: readonly Watched[]): Promise<ServerSlotReadings | string> {
    const configs = [...new Set(entries.map((entry) => entry.source))];
    const slotNames = [...new Set(entries.map((entry) => entry.slotName))];
    let failure = '';
    for (const config of configs) {
      try {
        const readings = await this.#readServer(config, slotNames);
        if (this.#serverFailures.delete(key)) {
          this.#options.logger.info(
            { server: `${config.host}:${config.port}` },
            'slot health: source readable again',
          );
        }
        return readings;
      } catch (error) {
        failure = isEngineError(error)
          ? error.message
          : `source: read replication slots on ${config.host}:${config.port} failed`;
      }
    }
    if (this.#serverFailures.get(key) !== failure) {
      this.#serverFailures.set(key, failure);
      const first = configs[0];
      this.#options.logger.warn(
        { server: first ? `${first.host}:${first.port}` : undefined, cause: failure },
        'slot health: cannot read the source',
      );
    }
    return failure;
  }

  /**
   * retainedWalLimitAction DropSlot: the slot of a paused or failed mirror
   * passed its limit. Dropped only when the catalog says the mirror created
   * it and the slot at the source is that one (source-ownership.ts); the
   * mirror's initial load is marked not done first, so whatever happens next
   * its next start empties its destination tables and loads them again from a
   * new slot instead of streaming past a gap. Returns the health to record
   * once dropped; undefined when nothing was dropped (the alert stands).
   */
  async #dropOverLimit(entry: Watched, health: SlotHealth): Promise<SlotHealth | undefined> {
    const { catalog, logger } = this.#options;
    const runtime = await catalog.getRuntime(entry.mirror);
    // Read again now: a mirror resumed since its phase was read has an engine on the slot.
    if (runtime?.phase !== 'paused' && runtime?.phase !== 'failed') return undefined;
    const setup = runtime.setup;
    if (!setup?.slotCreatedByMirror || !setup.slotIdentity || setup.slotName !== entry.slotName) {
      this.#warnOnce(entry.mirror, 'retained WAL limit: the slot is not one the mirror created; it is kept');
      return undefined;
    }
    const source = (this.#options.openSource ?? openSource)(entry.source, entry.mirror);
    try {
      await checkSlotIdentity(source, entry.mirror, setup);
      await catalog.setSnapshotCompleted(entry.mirror, false);
      const tables = (await catalog.listTables(entry.mirror)).filter((table) => table.state !== 'removed');
      await moveTablesIfAllowed(catalog, entry.mirror, tables, 'loadQueued');
      await source.dropSlot(entry.slotName);
    } catch (error) {
      this.#warnOnce(
        entry.mirror,
        `retained WAL limit: the slot could not be dropped (${isEngineError(error) ? error.message : 'unexpected error'})`,
      );
      return undefined;
    } finally {
      await source.close();
    }
    const message = `${health.message.replace(/: resume the mirror.*$/, '')}: dropped (retainedWalLimitAction DropSlot); the mirror empties its destination tables and loads them again when it runs`;
    await catalog.appendLog(entry.mirror, 'WARN', message);
    logger.warn(
      { mirror: entry.mirror, slot: entry.slotName },
      'retained WAL limit: replication slot dropped',
    );
    this.#options.notifier?.notify({
      kind: 'slot_dropped',
      mirror: entry.mirror,
      reason: 'RetainedWalOverLimit',
      message,
      at: new Date(),
    });
    await this.#options.onSlotDropped?.(entry.mirror, message);
    return {
      slotName: entry.slotName,
      checkedAt: health.checkedAt,
      healthy: null,
      reason: 'SlotNotCreated',
      message,
      reading: null,
    };
  }

  /** A guard's warning, once per mirror and cause (the monitor runs every interval). */
  #warnOnce(mirror: string, message: string): void {
    if (this.#guardWarnings.get(mirror) === message) return;
    this.#guardWarnings.set(mirror, message);
    this.#options.logger.warn({ mirror }, message);
  }

  /** The source peer's connection settings, or why there are none to use. */
  async #sourceConfig(name: string): Promise<RelationalConfig | string> {
    try {
      const found = await this.#options.store.getPeer(name);
      if (!found) return `source peer ${name} does not exist yet`;
      if (found.peer.kind !== 'relational') return `source peer ${name} is not a relational peer`;
      return found.peer.config;
    } catch (error) {
      if (error instanceof PeerSecretsUnavailableError) return error.message;
      throw error;
    }
  }
}

/** The slot a mirror reads before its setup recorded one: as source-ownership.ts names it. */
function slotNameOf(mirror: MirrorResource, installationId: string): string {
  return mirror.spec.replicationSlotName ?? defaultSlotName(mirror.name, installationId);
}

// Prometheus gauges of every mirror's replication slot, set by the slot health
// monitor (control/slot-health.ts) from its reads of the source, whatever the
// mirror's state: a paused or failed mirror has no engine to report, and WAL
// piling up behind its slot is exactly what must stay visible. Served by the
// process that reads: the leading operator in cluster mode, the standalone
// service otherwise. A mirror whose source cannot be read loses its value
// gauges (no value is better than a stale one); its last-check time stays.
import { Gauge, type Registry } from 'prom-client';
import type { SlotHealth } from '../catalog/catalog.ts';

type Labels = 'mirror' | 'namespace';

/** What the monitor reports; cheap, never throws. */
export interface SlotHealthSink {
  slotHealth(mirror: string, health: SlotHealth): void;
  /** The mirror is gone: its series go too. */
  forgetSlot(mirror: string): void;
}

const asNumber = (value: bigint) => Number(value);

export class SlotHealthMetrics implements SlotHealthSink {
  readonly #namespace: string | undefined;
  readonly #retained: Gauge<Labels>;
  readonly #unconfirmed: Gauge<Labels>;
  readonly #safeWalSize: Gauge<Labels>;
  readonly #active: Gauge<Labels>;
  readonly #walStatus: Gauge<Labels | 'wal_status'>;
  readonly #healthy: Gauge<Labels | 'reason'>;
  readonly #checked: Gauge<Labels>;
  /** The labels each mirror's labelled gauges carry now, to remove them when they change. */
  readonly #walStatusOf = new Map<string, string>();
  readonly #reasonOf = new Map<string, string>();

  /** `namespace`: the label every series carries (the operator's namespace); none in standalone mode. */
  constructor(options: { readonly registry: Registry; readonly namespace?: string | undefined }) {
    this.#namespace = options.namespace;
    const registers = [options.registry];
    const labelNames = ['mirror', 'namespace'] as const;
    this.#retained = new Gauge({
      name: 'tributary_mirror_slot_retained_wal_bytes',
      help: "WAL the source keeps for the mirror's slot (server WAL position minus restart_lsn), in every mirror state",
      labelNames,
      registers,
    });
    this.#unconfirmed = new Gauge({
      name: 'tributary_mirror_slot_unconfirmed_bytes',
      help: "WAL written since the slot's confirmed_flush_lsn: changes not yet confirmed durable at the destination",
      labelNames,
      registers,
    });
    this.#safeWalSize = new Gauge({
      name: 'tributary_mirror_slot_safe_wal_size_bytes',
      help: 'WAL that may still be written before the slot is at risk of invalidation (only with max_slot_wal_keep_size)',
      labelNames,
      registers,
    });
    this.#active = new Gauge({
      name: 'tributary_mirror_slot_active',
      help: 'Whether a walsender reads the slot now: 1 or 0',
      labelNames,
      registers,
    });
    this.#walStatus = new Gauge({
      name: 'tributary_mirror_slot_wal_status',
      help: "1 for the slot's wal_status (reserved, extended, unreserved, lost)",
      labelNames: [...labelNames, 'wal_status'],
      registers,
    });
    this.#healthy = new Gauge({
      name: 'tributary_mirror_slot_healthy',
      help: 'The SlotHealthy condition: 1 healthy, 0 not (invalidated, WAL at risk, missing), with its reason; absent while unknown',
      labelNames: [...labelNames, 'reason'],
      registers,
    });
    this.#checked = new Gauge({
      name: 'tributary_mirror_slot_last_read_timestamp_seconds',
      help: "When the mirror's slot was last read from its source, in seconds since the epoch",
      labelNames,
      registers,
    });
  }

  #labels(mirror: string): Partial<Record<Labels, string>> {
    return this.#namespace === undefined ? { mirror } : { mirror, namespace: this.#namespace };
  }

  slotHealth(mirror: string, health: SlotHealth): void {
    const labels = this.#labels(mirror);
    const { reading } = health;
    const set = (gauge: Gauge<Labels>, value: bigint | null | undefined) => {
      if (value === null || value === undefined) gauge.remove(labels);
      else gauge.set(labels, asNumber(value));
    };
    set(this.#retained, reading?.retainedWalBytes);
    set(this.#unconfirmed, reading?.unconfirmedBytes);
    set(this.#safeWalSize, reading?.safeWalSizeBytes);
    if (reading) this.#active.set(labels, reading.active ? 1 : 0);
    else this.#active.remove(labels);
    this.#relabel(
      this.#walStatus,
      this.#walStatusOf,
      mirror,
      'wal_status',
      reading?.walStatus ?? undefined,
      1,
    );
    this.#relabel(
      this.#healthy,
      this.#reasonOf,
      mirror,
      'reason',
      health.healthy === null ? undefined : health.reason,
      health.healthy ? 1 : 0,
    );
    if (reading || health.reason === 'SlotMissing' || health.reason === 'SlotNotCreated')
      this.#checked.set(labels, Math.floor(health.checkedAt.getTime() / 1000));
  }

  /** Sets a gauge whose extra label names the state, removing the series of the previous state. */
  #relabel<Extra extends string>(
    gauge: Gauge<Labels | Extra>,
    held: Map<string, string>,
    mirror: string,
    label: Extra,
    value: string | undefined,
    measured: number,
  ): void {
    const labels = this.#labels(mirror);
    const previous = held.get(mirror);
    if (previous !== undefined && previous !== value) {
      gauge.remove({ ...labels, [label]: previous } as Partial<Record<Labels | Extra, string>>);
    }
    if (value === undefined) held.delete(mirror);
    else {
      held.set(mirror, value);
      gauge.set({ ...labels, [label]: value } as Partial<Record<Labels | Extra, string>>, measured);
    }
  }

  forgetSlot(mirror: string): void {
    const labels = this.#labels(mirror);
    for (const gauge of [this.#retained, this.#unconfirmed, this.#safeWalSize, this.#active, this.#checked])
      gauge.remove(labels);
    this.#relabel(this.#walStatus, this.#walStatusOf, mirror, 'wal_status', undefined, 0);
    this.#relabel(this.#healthy, this.#reasonOf, mirror, 'reason', undefined, 0);
  }
}

// Decides what a person is told about each mirror (observability/notifier.ts
// delivers it): the mirror failed or recovered, its slot is in danger or healthy
// again, a table errored or streams again. The facts come from the catalog,
// which every engine, the slot health monitor and both modes' reconcilers
// write, so one watch serves standalone mode (its control plane runs it) and
// cluster mode (the leading operator runs it) alike.
//
// Guarantees: one notification per transition, not per look (the state told is
// remembered per mirror, `noticesOf` is the transition function); rounds never
// overlap; a round that fails is logged and the next one tries again; nothing
// here waits on the receiver (the notifier queues).
//
// What a process finds when it starts is taken as told, except a failure or a
// table's fault that began after the process started (it may have happened
// between its start and its first look). A fault that began while no process
// watched is therefore not notified; its alert (docs/runbooks/) still fires.
import type { Logger } from 'pino';
import type { Catalog, MirrorPhase, SlotHealth, TableState, TableStatus } from '../catalog/catalog.ts';
import { EngineError } from '../errors.ts';
import type { Notification, Notifier } from '../observability/notifier.ts';
import type { ResourceStore } from './store.ts';

/** What the watch reads of one mirror. */
export interface MirrorFacts {
  readonly phase: MirrorPhase | undefined;
  /** When the runtime row last changed (a failure's time, while failed). */
  readonly phaseSince: Date | undefined;
  readonly errorMessage: string | null;
  readonly slot: Pick<SlotHealth, 'healthy' | 'reason' | 'message'> | undefined;
  readonly tables: readonly Pick<TableStatus, 'sourceTable' | 'state' | 'stateSince' | 'problem'>[];
}

/** What the mirror was last told, per subject. */
export interface ToldState {
  /** The failure told and not yet followed by its recovery. */
  readonly failure: string | null;
  /** The slot health reason told as danger, not yet followed by its recovery. */
  readonly slotDanger: string | null;
  /** Errored tables told, by source table, with the kind told. */
  readonly erroredTables: ReadonlyMap<string, string>;
}

const recoveredPhases: ReadonlySet<MirrorPhase | undefined> = new Set(['running', 'completed']);
const goneTableStates: ReadonlySet<TableState> = new Set(['removed']);

/**
 * The notifications due for a mirror whose last told state is `told`
 * (undefined: never looked at by this process, which started at `watchingSince`),
 * and the state told after them.
 */
export function noticesOf(
  mirror: string,
  told: ToldState | undefined,
  facts: MirrorFacts,
  now: Date,
  watchingSince: Date,
): { readonly told: ToldState; readonly notices: Notification[] } {
  const notices: Notification[] = [];
  const firstLook = told === undefined;
  const since = (date: Date | undefined) => date !== undefined && date.getTime() >= watchingSince.getTime();

  let failure = told?.failure ?? null;
  if (facts.phase === 'failed') {
    const message = facts.errorMessage ?? 'failed';
    if (failure !== message) {
      if (!firstLook || since(facts.phaseSince))
        notices.push({ kind: 'mirror_failed', mirror, message, at: now });
      failure = message;
    }
  } else if (facts.phase === 'terminating' || facts.phase === 'terminated') {
    failure = null;
  } else if (failure !== null && recoveredPhases.has(facts.phase)) {
    notices.push({
      kind: 'mirror_recovered',
      mirror,
      message: facts.phase === 'completed' ? 'the mirror completed' : 'the mirror streams again',
      at: now,
    });
    failure = null;
  }

  let slotDanger = told?.slotDanger ?? null;
  const slot = facts.slot;
  if (slot?.healthy === false && slotDanger !== slot.reason) {
    if (!firstLook)
      notices.push({ kind: 'slot_in_danger', mirror, reason: slot.reason, message: slot.message, at: now });
    slotDanger = slot.reason;
  } else if (slot?.healthy === true && slotDanger !== null) {
    notices.push({ kind: 'slot_recovered', mirror, reason: slot.reason, message: slot.message, at: now });
    slotDanger = null;
  } else if (slot === undefined && facts.phase === 'terminated') {
    slotDanger = null;
  }

  const erroredTables = new Map(told?.erroredTables ?? []);
  const present = new Set<string>();
  for (const table of facts.tables) {
    present.add(table.sourceTable);
    const toldKind = erroredTables.get(table.sourceTable);
    if (table.state === 'errored') {
      const kind = table.problem?.kind ?? 'internal';
      if (toldKind !== kind) {
        if (!firstLook || since(table.stateSince)) {
          notices.push({
            kind: 'table_errored',
            mirror,
            table: table.sourceTable,
            reason: kind,
            message: table.problem ? `${table.problem.message}; ${table.problem.remedy}` : 'errored',
            at: now,
          });
        }
        erroredTables.set(table.sourceTable, kind);
      }
    } else if (toldKind !== undefined && table.state === 'streaming') {
      notices.push({
        kind: 'table_recovered',
        mirror,
        table: table.sourceTable,
        message: 'the table streams again',
        at: now,
      });
      erroredTables.delete(table.sourceTable);
    } else if (goneTableStates.has(table.state)) {
      erroredTables.delete(table.sourceTable);
    }
  }
  for (const table of erroredTables.keys()) if (!present.has(table)) erroredTables.delete(table);
  return { told: { failure, slotDanger, erroredTables }, notices };
}

/** How often the catalog is looked at unless TRIBUTARY_NOTIFY_CHECK_SECONDS says otherwise. */
export const defaultNoticeIntervalMs = 10_000;

/** TRIBUTARY_NOTIFY_CHECK_SECONDS as milliseconds (read once at start-up); throws on an invalid value. */
export function noticeIntervalMsFromEnvironment(env: NodeJS.ProcessEnv = process.env): number {
  const text = env.TRIBUTARY_NOTIFY_CHECK_SECONDS;
  if (text === undefined || text === '') return defaultNoticeIntervalMs;
  const seconds = Number(text);
  if (!Number.isFinite(seconds) || seconds < 1)
    throw new EngineError('config', 'TRIBUTARY_NOTIFY_CHECK_SECONDS must be a number of seconds, at least 1');
  return Math.round(seconds * 1000);
}

export interface MirrorNoticeWatchOptions {
  readonly store: ResourceStore;
  readonly catalog: Catalog;
  readonly notifier: Notifier;
  readonly logger: Logger;
  readonly intervalMs?: number;
}

export class MirrorNoticeWatch {
  readonly #options: MirrorNoticeWatchOptions;
  readonly #told = new Map<string, ToldState>();
  #watchingSince = new Date();
  #timer: NodeJS.Timeout | undefined;
  #round: Promise<void> | undefined;
  #stopped = false;

  constructor(options: MirrorNoticeWatchOptions) {
    this.#options = options;
  }

  /** Looks at once, then every interval, until `stop`. */
  start(): void {
    this.#stopped = false;
    this.#watchingSince = new Date();
    const next = () => {
      if (this.#stopped) return;
      this.#timer = setTimeout(
        () => void this.check().finally(next),
        this.#options.intervalMs ?? defaultNoticeIntervalMs,
      );
      this.#timer.unref();
    };
    void this.check().finally(next);
  }

  /** Stops looking; resolves once a round in progress has ended. The notifier is the caller's to close. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    await this.#round;
  }

  /** One round now (or the one in progress). */
  check(): Promise<void> {
    this.#round ??= this.#check()
      .catch((error: unknown) => this.#options.logger.warn({ err: error }, 'notification round failed'))
      .finally(() => {
        this.#round = undefined;
      });
    return this.#round;
  }

  async #check(): Promise<void> {
    const { store, catalog, notifier } = this.#options;
    const mirrors = await store.listMirrors();
    const seen = new Set<string>();
    for (const mirror of mirrors) {
      if (mirror.deleting) continue;
      seen.add(mirror.name);
      const [runtime, tables, slot] = await Promise.all([
        catalog.getRuntime(mirror.name),
        catalog.listTables(mirror.name),
        catalog.getSlotHealth(mirror.name),
      ]);
      const { told, notices } = noticesOf(
        mirror.name,
        this.#told.get(mirror.name),
        {
          phase: runtime?.phase,
          phaseSince: runtime?.updatedAt,
          errorMessage: runtime?.errorMessage ?? null,
          slot,
          tables,
        },
        new Date(),
        this.#watchingSince,
      );
      this.#told.set(mirror.name, told);
      for (const notice of notices) notifier.notify(notice);
    }
    for (const name of this.#told.keys()) {
      if (seen.has(name)) continue;
      this.#told.delete(name);
      notifier.forget(name);
    }
  }
}

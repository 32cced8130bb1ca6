// The life of one mapped table of a mirror as a state machine, and its one
// writer. The engine moves a table's state by calling this module with what
// happened to the table (an event); nothing else writes it.
// docs/mirror-lifecycle.md ("Table states") shows the same transition and
// event tables (table-states.test.ts keeps them equal, and fails when a file
// outside this module writes a table's state).
//
// The mirror's phase (phases.ts) says what the engine as a whole does; a
// table's state says where that one table is: a table can be loading while
// the others stream, or errored while the others go on. Moves that today's
// engine makes are marked in the event table; the others (resync, a table's
// own fault, a held schema change) are the states the flows that will make
// them need, accepted already so those flows add events, not a second machine.
import { EngineError } from '../errors.ts';
import type { Catalog, TableProblem, TableState } from './catalog.ts';

/** `new` stands for "the catalog has no row for the table yet". */
export type TableStateOrigin = TableState | 'new';

export const tableStateTransitions = {
  new: ['pending', 'loading', 'streaming'],
  pending: ['pending', 'loading', 'streaming', 'errored', 'removed'],
  loading: ['pending', 'loading', 'streaming', 'errored', 'removed'],
  streaming: ['pending', 'loading', 'resyncing', 'held', 'errored', 'removed'],
  resyncing: ['pending', 'loading', 'resyncing', 'streaming', 'errored', 'removed'],
  held: ['pending', 'loading', 'streaming', 'resyncing', 'errored', 'removed'],
  errored: ['pending', 'loading', 'resyncing', 'errored', 'removed'],
  removed: ['pending', 'loading', 'streaming'],
} as const satisfies Record<TableStateOrigin, readonly TableState[]>;

/**
 * What happens to a table, and the state each event leads to. Where the table
 * may come from is the transition table's to say, by the state it is in.
 */
export const tableStateEvents = {
  /** A load of the table is planned: the initial load starts (over), or an edit added it. */
  loadQueued: 'pending',
  /** The table's own load began (its partitions are being copied). */
  loadStarted: 'loading',
  /** The table's load finished: CDC applies its changes from the load's consistent point. */
  loadFinished: 'streaming',
  /** Mapped without a load (a mirror without an initial load), or first tracked after its load. */
  joinedWithoutLoad: 'streaming',
  /** A load of the table beside the live one began while its changes keep being applied. */
  resyncStarted: 'resyncing',
  /** The resync's copy replaced the live table. */
  resyncFinished: 'streaming',
  /** A schema change of the table waits for a person to accept or refuse it. */
  schemaChangeHeld: 'held',
  /** The held schema change was accepted and applied. */
  schemaChangeApplied: 'streaming',
  /** A fault of this table alone: its changes stop, the other tables go on. */
  tableFailed: 'errored',
  /** No longer in the mapping: nothing more is applied; the destination table stays. */
  unmapped: 'removed',
} as const satisfies Record<string, TableState>;

export type TableStateEvent = keyof typeof tableStateEvents;

/** The states that carry a problem and the position the table is behind from. */
export const stoppedTableStates: readonly TableState[] = ['errored', 'held'];

export function canTransitionTable(from: TableStateOrigin, to: TableState): boolean {
  return (tableStateTransitions[from] as readonly TableState[]).includes(to);
}

/** The states from which `to` may be entered. */
export function tableStatesLeadingTo(to: TableState): TableStateOrigin[] {
  return (Object.keys(tableStateTransitions) as TableStateOrigin[]).filter((from) =>
    canTransitionTable(from, to),
  );
}

/** A table move the table states do not allow, e.g. a removed table resyncing. */
export class TableStateTransitionError extends EngineError {
  readonly from: TableStateOrigin;
  readonly to: TableState;

  constructor(mirror: string, table: string, from: TableStateOrigin, to: TableState) {
    super('internal', `table ${table} of mirror ${mirror} cannot go from ${from} to ${to}`);
    this.name = 'TableStateTransitionError';
    this.from = from;
    this.to = to;
  }
}

/** What of the catalog the table states' writer uses. */
export type TableRecord = Pick<Catalog, 'listTables' | 'transitionTable'>;

/** A table by its names, as formatTableName writes them. */
export interface TableNames {
  readonly sourceTable: string;
  readonly destinationTable: string;
}

/** Why a table stopped (`tableFailed`, `schemaChangeHeld`): the problem and where its destination is. */
export interface TableStop {
  readonly problem: TableProblem;
  readonly behindLsn: bigint;
}

/**
 * Moves the table to the state `event` leads to. The catalog checks the
 * transition table against the state it holds in the same statement as the
 * write; a refused move throws TableStateTransitionError and leaves the state.
 * `stop` is required by the events that stop a table and ignored by the others
 * (every other move clears the problem).
 */
export async function moveTable(
  catalog: TableRecord,
  mirror: string,
  table: TableNames,
  event: TableStateEvent,
  stop?: TableStop,
): Promise<void> {
  const to = tableStateEvents[event];
  const stops = stoppedTableStates.includes(to);
  if (stops && !stop) {
    throw new EngineError('internal', `table ${table.sourceTable}: ${event} needs the problem and position`);
  }
  await catalog.transitionTable(mirror, {
    sourceTable: table.sourceTable,
    destinationTable: table.destinationTable,
    to,
    ...(stops && stop ? { problem: stop.problem, behindLsn: stop.behindLsn } : {}),
  });
}

/**
 * `moveTable` for each of `tables` whose current state allows the move and,
 * with `onlyFrom`, is one of those (one read of the mirror's tables); the
 * others stay as they are. Returns the tables that moved. A state changed by
 * another writer between the read and the write is refused by the catalog as
 * in `moveTable`.
 */
export async function moveTablesIfAllowed(
  catalog: TableRecord,
  mirror: string,
  tables: readonly TableNames[],
  event: TableStateEvent,
  onlyFrom?: readonly TableStateOrigin[],
): Promise<TableNames[]> {
  const to = tableStateEvents[event];
  const current = new Map(
    (await catalog.listTables(mirror)).map((table) => [table.sourceTable, table.state]),
  );
  const moving = tables.filter((table) => {
    const from = current.get(table.sourceTable) ?? 'new';
    return canTransitionTable(from, to) && (onlyFrom === undefined || onlyFrom.includes(from));
  });
  for (const table of moving) await moveTable(catalog, mirror, table, event);
  return moving;
}

/**
 * Tables the mirror tracks that are not in `mapped` (source tables) and not
 * removed yet go `removed`; returns them.
 */
export async function removeUnmappedTables(
  catalog: TableRecord,
  mirror: string,
  mapped: ReadonlySet<string>,
): Promise<TableNames[]> {
  const unmapped = (await catalog.listTables(mirror)).filter(
    (table) => !mapped.has(table.sourceTable) && table.state !== 'removed',
  );
  for (const table of unmapped) await moveTable(catalog, mirror, table, 'unmapped');
  return unmapped;
}

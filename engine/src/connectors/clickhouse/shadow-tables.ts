// A ClickHouse destination's shadow tables, for an online resync: a table's
// resync loads into `_tributary_resync_<table>` of the same database, created
// `AS` the live one (its columns, defaults, engine and ORDER BY), and takes
// every change of it too. Grants name tables, so those on the live name keep
// applying to whichever table holds it.
//
// ClickHouse has no transaction to put the swap in with the batch's
// checkpoint, so the swap is written down first and carried out after:
// 1. the batch's rows (live and shadow), as for any batch;
// 2. its checkpoint row, naming each swap due (`PendingSwap`, in the
//    checkpoint's `swaps` column): from here on the resync is complete;
// 3. the swap, idempotently, and the replaced table dropped.
// A crash after 2 leaves the swap named in the stored checkpoint; it is
// completed before anything else is written to the mirror's tables (at the
// engine's start, setupTables, and at the next batch). To tell a swap done
// from one not begun, each needs a sign that survives it:
// - `EXCHANGE TABLES` (a database of the Atomic engine, 20.x and later:
//   readers see the old table or the new one, never neither): the shadow's
//   UUID, written down in 2. The live name holding that UUID means done.
// - Otherwise (18.x, a database of the Ordinary engine) one statement
//   `RENAME TABLE live TO replaced, shadow TO live`: the names alone tell
//   where it stands. Done under the server's DDL lock, but not atomically for
//   readers: a query in that instant may find no table of the live name
//   (docs/clickhouse.md, "An online resync").
import type { Logger } from 'pino';
import { EngineError, isEngineError, tableFault } from '../../errors.ts';
import { formatTableName } from '../../resources/mirror.ts';
import type { ShadowTables } from '../destination.ts';
import type { DestinationTable, TableSwap } from '../records.ts';
import type { TableSchemas } from './schema.ts';
import { quoteIdentifier, stringLiteral } from './sql.ts';
import type { ClickHouseTransport } from './transport.ts';

const shadowPrefix = '_tributary_resync_';
const replacedPrefix = '_tributary_replaced_';

/** A swap the checkpoint names as due: where it stands is read from the server. */
export interface PendingSwap {
  /** The source table (`schema.table`): a swap the server refuses is this table's fault. */
  readonly sourceTable: string;
  readonly database: string;
  readonly live: string;
  readonly shadow: string;
  /** The shadow's UUID when the swap is an EXCHANGE, empty when it is a RENAME. */
  readonly uuid: string;
}

const noUuid = '00000000-0000-0000-0000-000000000000';

export class ClickHouseShadowTables implements ShadowTables {
  readonly intoLive = false;
  readonly #transport: ClickHouseTransport;
  readonly #schemas: TableSchemas;
  readonly #logger: Logger;

  constructor(transport: ClickHouseTransport, schemas: TableSchemas, logger: Logger) {
    this.#transport = transport;
    this.#schemas = schemas;
    this.#logger = logger;
  }

  shadowOf(live: DestinationTable): DestinationTable {
    return {
      ...live,
      destination: { schema: live.destination.schema, table: `${shadowPrefix}${live.destination.table}` },
    };
  }

  async create(live: DestinationTable, shadow: DestinationTable): Promise<void> {
    const from = this.#schemas.target(live);
    const to = this.#schemas.target(shadow);
    const sql = (name: string) => `${quoteIdentifier(to.database)}.${quoteIdentifier(name)}`;
    await this.#transport.command(
      `DROP TABLE IF EXISTS ${sql(to.name)}`,
      `drop a leftover ${to.database}.${to.name}`,
    );
    await this.#transport.command(
      `DROP TABLE IF EXISTS ${sql(replacedName(from.name))}`,
      `drop a leftover ${to.database}.${replacedName(from.name)}`,
    );
    await this.#transport.command(
      `CREATE TABLE ${sql(to.name)} AS ${quoteIdentifier(from.database)}.${quoteIdentifier(from.name)}`,
      `create the resync table of ${from.database}.${from.name}`,
      'schema_mismatch',
    );
    this.#schemas.forget(shadow);
  }

  async drop(shadow: DestinationTable): Promise<void> {
    const { database, name } = this.#schemas.target(shadow);
    await this.#transport.command(
      `DROP TABLE IF EXISTS ${quoteIdentifier(database)}.${quoteIdentifier(name)}`,
      `drop ${database}.${name}`,
    );
    this.#schemas.forget(shadow);
  }

  /** The swaps a batch's checkpoint is to name, each with the sign that will tell it done. */
  async pending(swaps: readonly TableSwap[]): Promise<PendingSwap[]> {
    const pending: PendingSwap[] = [];
    for (const swap of swaps) {
      const live = this.#schemas.target(swap.live);
      const shadow = this.#schemas.target(swap.shadow);
      const exchanges = await this.#exchanges(live.database);
      const uuid = exchanges
        ? ((await this.#uuids(live.database, [shadow.name])).get(shadow.name) ?? '')
        : '';
      pending.push({
        sourceTable: formatTableName(swap.live.source),
        database: live.database,
        live: live.name,
        shadow: shadow.name,
        uuid: uuid === noUuid ? '' : uuid,
      });
    }
    return pending;
  }

  /** Carries out swaps the checkpoint names, whatever part of them is done already. */
  async complete(swaps: readonly PendingSwap[]): Promise<void> {
    for (const swap of swaps) {
      try {
        await (swap.uuid ? this.#exchange(swap) : this.#rename(swap));
      } catch (error) {
        // The server refused (a table engine without EXCHANGE, say): this
        // table stops; its shadow is dropped with it and the swap left undone.
        throw isEngineError(error) ? tableFault(error, swap.sourceTable) : error;
      }
    }
  }

  async #exchange(swap: PendingSwap): Promise<void> {
    const uuids = await this.#uuids(swap.database, [swap.live, swap.shadow]);
    const sql = (name: string) => `${quoteIdentifier(swap.database)}.${quoteIdentifier(name)}`;
    if (uuids.get(swap.live) !== swap.uuid) {
      if (uuids.get(swap.shadow) !== swap.uuid) {
        this.#logger.warn(swap, 'the resync table to swap in is gone: swap not made');
        return;
      }
      await this.#transport.command(
        `EXCHANGE TABLES ${sql(swap.live)} AND ${sql(swap.shadow)}`,
        `replace ${swap.database}.${swap.live} by its resync`,
        'schema_mismatch',
      );
    }
    // The shadow's name now holds the table replaced.
    await this.#transport.command(
      `DROP TABLE IF EXISTS ${sql(swap.shadow)}`,
      `drop the table ${swap.database}.${swap.live} replaced`,
    );
    this.#forgetAll(swap);
  }

  async #rename(swap: PendingSwap): Promise<void> {
    const replaced = replacedName(swap.live);
    const present = await this.#uuids(swap.database, [swap.live, swap.shadow, replaced]);
    const sql = (name: string) => `${quoteIdentifier(swap.database)}.${quoteIdentifier(name)}`;
    const what = `replace ${swap.database}.${swap.live} by its resync`;
    if (present.has(swap.shadow)) {
      if (!present.has(replaced) && present.has(swap.live)) {
        await this.#transport.command(
          `RENAME TABLE ${sql(swap.live)} TO ${sql(replaced)}, ${sql(swap.shadow)} TO ${sql(swap.live)}`,
          what,
          'schema_mismatch',
        );
      } else if (!present.has(swap.live)) {
        // The first rename of the statement happened, the second not (a server crash).
        await this.#transport.command(
          `RENAME TABLE ${sql(swap.shadow)} TO ${sql(swap.live)}`,
          what,
          'schema_mismatch',
        );
      } else {
        throw new EngineError(
          'schema_mismatch',
          `destination: ${what}: ${swap.database}.${replaced} is there already; drop it and resync the table`,
        );
      }
    } else if (!present.has(replaced)) {
      return; // Done before, or given up (the table stopped and its shadow was dropped).
    }
    await this.#transport.command(
      `DROP TABLE IF EXISTS ${sql(replaced)}`,
      `drop the table ${swap.database}.${swap.live} replaced`,
    );
    this.#forgetAll(swap);
  }

  #forgetAll(swap: PendingSwap): void {
    for (const table of [swap.live, swap.shadow]) this.#schemas.forgetName(swap.database, table);
  }

  /** Whether the database swaps tables atomically: EXCHANGE TABLES needs the Atomic engine (or Replicated, built on it). */
  async #exchanges(database: string): Promise<boolean> {
    const [row] = await this.#transport.rows<{ engine: string }>(
      `SELECT engine FROM system.databases WHERE name = ${stringLiteral(database)}`,
      `read the engine of database ${database}`,
    );
    return row?.engine === 'Atomic' || row?.engine === 'Replicated';
  }

  /** The named tables present, with their UUIDs where the server has them (empty otherwise). */
  async #uuids(database: string, names: readonly string[]): Promise<Map<string, string>> {
    const exchanges = await this.#exchanges(database);
    const rows = await this.#transport.rows<{ name: string; uuid: string }>(
      `SELECT name, ${exchanges ? 'toString(uuid)' : "''"} AS uuid FROM system.tables
       WHERE database = ${stringLiteral(database)} AND name IN (${names.map((name) => stringLiteral(name)).join(', ')})`,
      `look up tables of ${database}`,
    );
    return new Map(rows.map((row) => [row.name, row.uuid]));
  }
}

function replacedName(live: string): string {
  return `${replacedPrefix}${live}`;
}

// ClickHouse as a destination (the "analytics" peer kind). Every target table
// is a ReplacingMergeTree keyed on the source key (or the mapping's ordering
// ranks) whose version column increases with the source's commit order, so a
// batch is applied by inserting rows only, and a batch replayed after a crash
// yields the same table under FINAL. The batch's checkpoint row is written
// after its rows. docs/clickhouse.md explains the design and its limits.
//
// transport.ts: the HTTP client and error classification; schema.ts: target
// tables and their cached shapes; checkpoints.ts: the checkpoint table;
// table-changes.ts: a batch's changes as held; apply.ts: snapshot rows and
// batches; shadow-tables.ts: an online resync's tables and swaps.
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { EngineError, isEngineError, tableFault } from '../../errors.ts';
import { formatTableName, type TableMapping } from '../../resources/mirror.ts';
import type { AnalyticsConfig } from '../../resources/peer.ts';
import type { Destination, DestinationTableState, MirrorColumns } from '../destination.ts';
import type { ChangeBatch, Checkpoint, DestinationTable, TableAlteration } from '../records.ts';
import { applyTableChanges, writeSnapshotRows } from './apply.ts';
import { CheckpointStore } from './checkpoints.ts';
import { maxChangesPerBatch } from './row-version.ts';
import { TableSchemas } from './schema.ts';
import { ClickHouseShadowTables } from './shadow-tables.ts';
import { ClickHouseTableChanges } from './table-changes.ts';
import { ClickHouseTransport } from './transport.ts';

export interface ClickHouseDestinationOptions {
  /** The mirror's name: its checkpoint row may name swaps to complete before anything is written. */
  readonly mirror: string;
  readonly mirrorColumns: MirrorColumns;
  /** The mirror's table mappings: their `columns[].ordering` ranks choose ORDER BY. */
  readonly tableMappings: readonly TableMapping[];
  readonly maxBatchSize: number;
  readonly logger: Logger;
}

export class ClickHouseDestination implements Destination<ClickHouseTableChanges> {
  /** A batch's leading inserts are held as TupleData, the rest as records (table-changes.ts). */
  readonly changeBuffer = (table: DestinationTable): ClickHouseTableChanges =>
    new ClickHouseTableChanges(table);
  readonly #config: AnalyticsConfig;
  readonly #options: ClickHouseDestinationOptions;
  readonly #transport: ClickHouseTransport;
  readonly #schemas: TableSchemas;
  readonly #checkpoints: CheckpointStore;
  readonly shadowTables: ClickHouseShadowTables;

  constructor(config: AnalyticsConfig, options: ClickHouseDestinationOptions) {
    this.#config = config;
    this.#options = options;
    this.#transport = new ClickHouseTransport(config);
    this.#schemas = new TableSchemas(this.#transport, config.database, {
      mirrorColumns: options.mirrorColumns,
      tableMappings: options.tableMappings,
    });
    this.#checkpoints = new CheckpointStore(this.#transport, config.database);
    this.shadowTables = new ClickHouseShadowTables(this.#transport, this.#schemas, options.logger);
  }

  async check(): Promise<{ version: string }> {
    await this.#transport.server();
    return { version: this.#transport.versionText };
  }

  async close(): Promise<void> {
    await this.#transport.close();
  }

  async setupTables(tables: readonly DestinationTable[]): Promise<void> {
    if (this.#options.maxBatchSize > maxChangesPerBatch) {
      throw new EngineError(
        'config',
        `max_batch_size must be at most ${maxChangesPerBatch} for a ClickHouse destination (row versions hold the change's index in 27 bits)`,
      );
    }
    if (this.#config.objstorePath) {
      this.#options.logger.info(
        'object-storage staging is not used yet: rows are inserted directly over HTTP',
      );
    }
    const capabilities = await this.#transport.server();
    await this.#checkpoints.create();
    // Before any table is looked at: a swap a crash interrupted holds its live name.
    await this.shadowTables.complete((await this.#checkpoints.stored(this.#options.mirror)).swaps);
    for (const table of tables) await this.#schemas.setup(table, capabilities);
  }

  async tableStates(tables: readonly DestinationTable[]): Promise<DestinationTableState[]> {
    const states: DestinationTableState[] = [];
    for (const table of tables) states.push(await this.#schemas.state(table));
    return states;
  }

  async truncateTables(tables: readonly DestinationTable[]): Promise<void> {
    for (const table of tables) {
      const shape = await this.#schemas.shape(table);
      await this.#transport.command(`TRUNCATE TABLE ${shape.sql}`, `truncate ${shape.label}`);
    }
  }

  async writeSnapshotPartition(table: DestinationTable, copyText: Readable): Promise<number> {
    const target = await this.#schemas.writer(table);
    return writeSnapshotRows(this.#transport, target, copyText);
  }

  async readCheckpoint(mirror: string): Promise<Checkpoint | undefined> {
    return this.#checkpoints.read(mirror);
  }

  async removeCheckpoint(mirror: string): Promise<void> {
    await this.#checkpoints.remove(mirror, (swaps) => this.shadowTables.complete(swaps));
  }

  async refuseAlteration(alteration: TableAlteration): Promise<string | undefined> {
    return this.#schemas.refusal(alteration, await this.#transport.server());
  }

  async alterColumns(alteration: TableAlteration): Promise<void> {
    await this.#schemas.alter(alteration, await this.#transport.server());
  }

  async syncBatch(batch: ChangeBatch<ClickHouseTableChanges>): Promise<void> {
    const stored = await this.#checkpoints.stored(batch.mirror);
    if (stored.checkpoint && stored.checkpoint.batchId >= batch.batchId) {
      this.#options.logger.info({ batchId: String(batch.batchId) }, 'batch already applied, skipped');
      return;
    }
    // A swap named by the last checkpoint and interrupted: its live name is written to next.
    if (stored.swaps.length > 0) await this.shadowTables.complete(stored.swaps);
    const versionBatch = stored.versionBase + batch.batchId;
    for (const { table, held } of batch.tables) {
      try {
        const target = await this.#schemas.writer(table);
        await applyTableChanges(this.#transport, target, versionBatch, held, this.#options.logger);
      } catch (error) {
        // A value or shape this table refuses is its own fault (the tables
        // written before it hold versioned rows the replay writes again).
        throw isEngineError(error) ? tableFault(error, formatTableName(table.source)) : error;
      }
    }
    // Swaps are named in the checkpoint, then made (shadow-tables.ts): the
    // checkpoint says the resync is complete, and a crash before the swap
    // leaves it to be completed.
    const swaps = await this.shadowTables.pending(batch.swaps ?? []);
    await this.#checkpoints.write(
      batch.mirror,
      { batchId: batch.batchId, lsn: batch.endLsn, transactionPosition: batch.transactionPosition },
      stored.versionBase,
      stored,
      swaps,
    );
    await this.shadowTables.complete(swaps);
  }
}

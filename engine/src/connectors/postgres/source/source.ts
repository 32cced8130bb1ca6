// PostgreSQL as a mirror's source (source.ts has the contract): logical
// replication over pgoutput, initial loads with COPY under the slot's exported
// snapshot. Every driver error leaves this module classified.
import type { Readable } from 'node:stream';
import type pg from 'pg';
import { EngineError } from '../../../errors.ts';
import { parseLsn } from '../../../model/lsn.ts';
import { warnUnverifiedHostKey } from '../../../net/ssh-tunnel.ts';
import { formatTableName, type TableName } from '../../../resources/mirror.ts';
import type { RelationalConfig } from '../../../resources/peer.ts';
import { classifyError, classifyPgError, classifySlotState } from '../../classify/index.ts';
import type {
  BackfillReader,
  ChangeStream,
  CreatedSlot,
  CreateSlotOptions,
  MissingTables,
  PartitionLeaf,
  PartitionLeaves,
  PublicationFiltering,
  PublishedTable,
  RowFilterEvaluation,
  SlotRow,
  SnapshotPartition,
  SnapshotReader,
  Source,
  SourceTableInfo,
  SourceValidationInput,
  ValidatedSource,
} from '../../source.ts';
import { checkRelationalPeer } from '../driver/check.ts';
import { connectPostgres, type PgConnection } from '../driver/connect.ts';
import { PostgresBackfillReader } from './backfill-reader.ts';
import { ReplicationStream } from './replication-stream.ts';
import { checkRowFilter, evaluateRowFilter } from './row-filter.ts';
import {
  createSlot,
  defaultPublicationName,
  defaultSlotName,
  dropPublication,
  dropSlot,
  ensurePublication,
  publicationExists,
  readSlot,
  readSlotFailover,
  readSlotState,
  removeFromPublication,
  setSlotFailover,
  slotExists,
} from './slot.ts';
import {
  beginSnapshotTransaction,
  copyPartition,
  type PartitionCopy,
  planPartitions,
} from './snapshot-reader.ts';
import {
  leafRowsBeforeAttach,
  liveColumns,
  partitionAncestors,
  partitionLeavesOf,
  tableNamesByOid,
} from './table-info.ts';
import { awaitTransactionVisible } from './transaction-visibility.ts';
import { findMissingTables, validateSource } from './validate-source.ts';

export interface PostgresSourceOptions {
  /** The mirror's name: connections are named `tributary:<mirror>:<role>` on the server. */
  readonly mirror: string;
}

export class PostgresSource implements Source {
  readonly #config: RelationalConfig;
  readonly #mirror: string;
  /** The setup connection, opened at first use (see the Source contract). */
  #setup: Promise<PgConnection> | undefined;
  /** Type lookups get a connection of their own: they run while the setup one may be closed. */
  #typeLookup: Promise<PgConnection> | undefined;

  constructor(config: RelationalConfig, options: PostgresSourceOptions) {
    this.#config = config;
    this.#mirror = options.mirror;
  }

  check(): Promise<{ version: string }> {
    return checkRelationalPeer(this.#config);
  }

  reportConfigWarnings(peerName: string, warn: (message: string) => void): void {
    warnUnverifiedHostKey(peerName, this.#config.sshConfig, warn);
  }

  async close(): Promise<void> {
    const held = [this.#setup, this.#typeLookup];
    this.#setup = undefined;
    this.#typeLookup = undefined;
    await Promise.all(
      held.map(async (opening) => {
        const connection = await opening?.catch(() => undefined);
        await connection?.close().catch(() => {});
      }),
    );
  }

  #applicationName(role: string): string {
    return `tributary:${this.#mirror}:${role}`.slice(0, 63);
  }

  #connect(role: string, replication?: 'database'): Promise<PgConnection> {
    return connectPostgres(this.#config, {
      applicationName: this.#applicationName(role),
      side: 'source',
      ...(replication ? { replication } : {}),
    });
  }

  async #client() {
    if (!this.#setup) {
      const opening = this.#connect('setup');
      this.#setup = opening;
      // A failed open is not kept: the next call tries again.
      opening.catch(() => {
        if (this.#setup === opening) this.#setup = undefined;
      });
    }
    return (await this.#setup).client;
  }

  async validate(input: SourceValidationInput): Promise<ValidatedSource> {
    const client = await this.#client();
    try {
      return await validateSource(client, input);
    } catch (error) {
      throw classifyPgError(error, 'source: validate');
    }
  }

  async missingTables(tables: readonly TableName[]): Promise<MissingTables> {
    const client = await this.#client();
    try {
      return await findMissingTables(client, tables);
    } catch (error) {
      throw classifyPgError(error, 'source: look up the mapped tables');
    }
  }

  async tableNames(oids: readonly number[]): Promise<Map<number, TableName>> {
    if (oids.length === 0) return new Map();
    const client = await this.#client();
    try {
      return await tableNamesByOid(client, oids);
    } catch (error) {
      throw classifyPgError(error, 'source: look up the mapped tables by identity');
    }
  }

  async partitionLeaves(tables: readonly TableName[]): Promise<PartitionLeaves> {
    const client = await this.#client();
    try {
      return await partitionLeavesOf(client, tables);
    } catch (error) {
      throw classifyPgError(error, 'source: look up the partitions of the mapped tables');
    }
  }

  async rowsBeforeAttach(leaf: PartitionLeaf): Promise<boolean> {
    const client = await this.#client();
    try {
      return await leafRowsBeforeAttach(client, leaf);
    } catch (error) {
      throw classifyPgError(error, `source: look for rows ${formatTableName(leaf.name)} held when attached`);
    }
  }

  async emitHeartbeat(): Promise<bigint> {
    const client = await this.#client();
    try {
      const result = await client.query<{ lsn: string }>(
        `SELECT pg_logical_emit_message(true, 'tributary_heartbeat', '')::text AS lsn`,
      );
      return parseLsn(result.rows[0]?.lsn ?? '0/0');
    } catch (error) {
      throw classifyPgError(error, 'source: write a heartbeat (pg_logical_emit_message)');
    }
  }

  defaultNames(mirror: string, installationId: string): { slotName: string; publicationName: string } {
    return {
      slotName: defaultSlotName(mirror, installationId),
      publicationName: defaultPublicationName(mirror, installationId),
    };
  }

  async database(): Promise<string> {
    const client = await this.#client();
    let database: string | undefined;
    try {
      const result = await client.query<{ db: string }>(`SELECT current_database() AS db`);
      database = result.rows[0]?.db;
    } catch (error) {
      throw classifyPgError(error, 'source: read current database', 'source_setup');
    }
    if (!database) throw new EngineError('internal', 'source: current_database() returned no row');
    return database;
  }

  async readSlot(slotName: string): Promise<SlotRow | undefined> {
    return readSlot(await this.#client(), slotName);
  }

  async slotExists(slotName: string): Promise<boolean> {
    return slotExists(await this.#client(), slotName);
  }

  async slotLoss(slotName: string): Promise<EngineError | undefined> {
    return classifySlotState(slotName, await readSlotState(await this.#client(), slotName));
  }

  async slotFailover(slotName: string): Promise<boolean | null> {
    return readSlotFailover(await this.#client(), slotName);
  }

  async setSlotFailover(slotName: string, failover: boolean): Promise<void> {
    const replication = await this.#connect('slot', 'database');
    try {
      await setSlotFailover(replication.client, slotName, failover);
    } finally {
      await replication.close();
    }
  }

  async publicationExists(publicationName: string): Promise<boolean> {
    return publicationExists(await this.#client(), publicationName);
  }

  async ensurePublication(
    publicationName: string,
    tables: readonly PublishedTable[],
  ): Promise<PublicationFiltering> {
    return ensurePublication(await this.#client(), publicationName, tables);
  }

  async removeFromPublication(publicationName: string, tables: readonly TableName[]): Promise<void> {
    await removeFromPublication(await this.#client(), publicationName, tables);
  }

  async createSlot(
    slotName: string,
    options: CreateSlotOptions,
    whileOpen: (slot: CreatedSlot) => Promise<void>,
  ): Promise<CreatedSlot> {
    // The exporting replication connection must stay open and idle until every
    // partition has imported the snapshot; a temporary slot lives as long.
    const replication = await this.#connect('slot', 'database');
    try {
      const slot = await createSlot(replication.client, slotName, options.exportSnapshot, {
        ...(options.temporary ? { temporary: true } : {}),
        ...(options.failover ? { failover: true } : {}),
      });
      await whileOpen(slot);
      return slot;
    } finally {
      await replication.close();
    }
  }

  async planPartitions(
    table: TableName,
    snapshotName: string | null,
    rowsPerPartition: number,
  ): Promise<SnapshotPartition[]> {
    const planner = await this.#connect('snapshot');
    try {
      await beginSnapshotTransaction(planner.client, snapshotName);
      return await planPartitions(planner.client, table, rowsPerPartition);
    } finally {
      await planner.close();
    }
  }

  async openSnapshotReader(snapshotName: string | null): Promise<SnapshotReader> {
    const open = () => this.#connect('snapshot');
    return new PostgresSnapshotReader(open, await open(), snapshotName);
  }

  async openBackfillReader(): Promise<BackfillReader> {
    return new PostgresBackfillReader(() => this.#connect('backfill'));
  }

  openStream(options: {
    readonly slotName: string;
    readonly publicationName: string;
    readonly startLsn: bigint;
    readonly skipBefore?: { readonly commitLsn: bigint; readonly changeLsn: bigint } | undefined;
  }): Promise<ChangeStream> {
    return ReplicationStream.start(this.#config, {
      ...options,
      applicationName: this.#applicationName('cdc'),
    });
  }

  async rowFilterColumns(table: SourceTableInfo, rowFilter: string): Promise<string[]> {
    const checked = await checkRowFilter(await this.#client(), table, rowFilter, false);
    if (checked.problem) throw new EngineError('config', checked.problem);
    return [...checked.columns];
  }

  async evaluateRowFilter(request: RowFilterEvaluation): Promise<boolean[]> {
    return evaluateRowFilter(await this.#lookupClient(), request);
  }

  async typeNames(
    columns: readonly { readonly typeOid: number; readonly typeModifier: number }[],
  ): Promise<string[]> {
    if (columns.length === 0) return [];
    const client = await this.#lookupClient();
    const names: string[] = [];
    try {
      for (const column of columns) {
        const result = await client.query<{ type_name: string }>(
          `SELECT format_type($1::oid, $2::int) AS type_name`,
          [column.typeOid, column.typeModifier],
        );
        names.push(result.rows[0]?.type_name ?? 'text');
      }
    } catch (error) {
      throw classifyPgError(error, 'source: look up column types');
    }
    return names;
  }

  async partitionAncestors(relationId: number): Promise<TableName[]> {
    const client = await this.#lookupClient();
    try {
      return await partitionAncestors(client, relationId);
    } catch (error) {
      throw classifyPgError(error, 'source: look up the partition parents of a relation');
    }
  }

  async liveColumns(relationId: number, xid: number): Promise<{ attnum: number; name: string }[]> {
    const client = await this.#lookupClient();
    try {
      await awaitTransactionVisible(client, xid);
      return await liveColumns(client, relationId);
    } catch (error) {
      throw classifyPgError(error, 'source: look up the columns of a relation');
    }
  }

  /** The connection of lookups made while the change stream runs (types, partition parents). */
  async #lookupClient(): Promise<pg.Client> {
    if (!this.#typeLookup) {
      const opening = this.#connect('schema');
      this.#typeLookup = opening;
      opening.catch(() => {
        if (this.#typeLookup === opening) this.#typeLookup = undefined;
      });
    }
    return (await this.#typeLookup).client;
  }

  async dropSlot(slotName: string): Promise<void> {
    await dropSlot(await this.#client(), slotName);
  }

  async dropPublication(publicationName: string): Promise<void> {
    await dropPublication(await this.#client(), publicationName);
  }
}

class PostgresSnapshotReader implements SnapshotReader {
  readonly #open: () => Promise<PgConnection>;
  readonly #snapshotName: string | null;
  /** Opened at first use, and again after a partition had to drop it. */
  #connection: Promise<PgConnection> | undefined;

  constructor(open: () => Promise<PgConnection>, connection: PgConnection, snapshotName: string | null) {
    this.#open = open;
    this.#connection = Promise.resolve(connection);
    this.#snapshotName = snapshotName;
  }

  async copyPartition(
    table: TableName,
    columns: readonly string[],
    partition: SnapshotPartition,
    write: (copyText: Readable) => Promise<number>,
    rowFilter?: string,
  ): Promise<number> {
    this.#connection ??= this.#open();
    const connection = await this.#connection;
    const { client } = connection;
    await beginSnapshotTransaction(client, this.#snapshotName);
    const copy = copyPartition(client, table, columns, partition, rowFilter);
    const what = `initial load of ${formatTableName(table)}`;
    let written: number;
    try {
      written = await write(copy.stream);
    } catch (error) {
      // Read before the connection is dropped, which fails the COPY too. The
      // source's own failure (its COPY broke) is the source's; anything else
      // came from the write, that is from the destination.
      const sourceFailure = copy.failure();
      await this.#abandon(connection, copy);
      throw sourceFailure
        ? classifyPgError(sourceFailure, `source: ${what}`)
        : classifyError(error, `destination: ${what}`, 'destination_write');
    }
    if (!copy.ended()) {
      // A COMMIT queued behind a COPY nobody reads would never run.
      await this.#abandon(connection, copy);
      throw new EngineError('internal', `destination: ${what} returned before reading its rows to the end`);
    }
    try {
      await client.query('COMMIT');
    } catch (error) {
      await this.#abandon(connection, copy);
      throw classifyPgError(error, `source: ${what}`);
    }
    return written;
  }

  /**
   * Ends the partition's transaction without waiting on its COPY. A COPY that
   * was read to its end leaves the connection ready for a ROLLBACK. One that
   * was not holds the connection: pg-copy-streams reads the socket only as
   * its stream is read, and pg queues every later query behind it, so a
   * ROLLBACK sent now would wait for ever. Such a connection is dropped
   * instead (the server rolls the transaction back when it goes), and the
   * next partition opens a new one.
   */
  async #abandon(connection: PgConnection, copy: PartitionCopy): Promise<void> {
    if (copy.ended() && !copy.failure()) {
      const rolledBack = await connection.client.query('ROLLBACK').then(
        () => true,
        () => false,
      );
      if (rolledBack) return;
    }
    copy.stream.destroy();
    this.#connection = undefined;
    await connection.close().catch(() => {});
  }

  async close(): Promise<void> {
    const opening = this.#connection;
    this.#connection = undefined;
    const connection = await opening?.catch(() => undefined);
    await connection?.close();
  }
}

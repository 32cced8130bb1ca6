// Kafka (a stream peer) as a destination: one message per change, at least
// once and in order per key (docs/kafka.md).
//
// - The producer is idempotent with acks=all and one request in flight, so a
//   retried request never reorders or doubles a partition's messages.
// - Requests are compressed with the peer's `compression` (client.ts), none by default.
// - A batch is sent in chunks of bounded size, one after the other; syncBatch
//   resolves once every chunk is acknowledged and the mirror's checkpoint is
//   written after them to the compacted `_tributary_checkpoints` topic.
// - A failed send fails the batch; the pipeline retries it from the last
//   checkpoint, so the messages already acknowledged are sent again.
//
// transport.ts: the producer, admin clients and fetchers; topics.ts: topic
// names, creation and partitions; checkpoints.ts: the checkpoint topic;
// apply.ts: snapshot rows and batches as messages, with the script's message
// form (script-records.ts) when the mirror has a script.
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { LogLevel } from '../../catalog/catalog.ts';
import { EngineError, isEngineError } from '../../errors.ts';
import { formatTableName } from '../../resources/mirror.ts';
import type { StreamConfig } from '../../resources/peer.ts';
import type { ScriptSource } from '../../resources/script.ts';
import type { SandboxLimits } from '../../scripting/lua-vm.ts';
import { RecordScript } from '../../scripting/record-script.ts';
import { classifyKafkaError, topicRefusal } from '../classify/index.ts';
import type { Destination, DestinationTableState, ShadowTables } from '../destination.ts';
import type { ChangeBatch, Checkpoint, DestinationTable, TableAlteration } from '../records.ts';
import { defaultChunkBytes, KafkaApply } from './apply.ts';
import { CheckpointStore } from './checkpoints.ts';
import { connectionErrorOf } from './client.ts';
import { HeldMessages, type KafkaHeld, ScriptedChanges } from './held-messages.ts';
import { tableFormat } from './message-format.ts';
import { type PartitionerName, PartitionStrategy } from './partitioners.ts';
import { KnownTopics, topicNameProblem } from './topics.ts';
import { KafkaTransport } from './transport.ts';

export interface KafkaDestinationOptions {
  readonly mirror: string;
  readonly logger: Logger;
  /** The mirror's script, when it has one. */
  readonly script?: ScriptSource | undefined;
  /** Where script `print` lines go; the process log when absent. */
  readonly log?: ((level: LogLevel, message: string) => void) | undefined;
  readonly scriptLimits?: SandboxLimits | undefined;
  /** Upper bound of the key, value and header bytes of one produce request. */
  readonly chunkBytes?: number | undefined;
  /** Upper bound of the messages of one produce request. */
  readonly chunkMessages?: number | undefined;
}

export class KafkaDestination implements Destination<KafkaHeld> {
  readonly #logger: Logger;
  readonly #script: RecordScript | undefined;
  readonly #transport: KafkaTransport;
  readonly #topics: KnownTopics;
  readonly #checkpoints: CheckpointStore;
  readonly #apply: KafkaApply;
  /**
   * A resync of a table is its rows again, as `snapshot` messages among its
   * changes on its topic, in order with them (docs/kafka.md): nothing is
   * created beside the topic and nothing swapped.
   */
  readonly shadowTables: ShadowTables = {
    intoLive: true,
    shadowOf: (live) => ({ ...live }),
    create: async () => {},
    drop: async () => {},
  };

  constructor(config: StreamConfig, options: KafkaDestinationOptions) {
    this.#logger = options.logger;
    this.#script = options.script
      ? new RecordScript(options.script, {
          logger: options.logger,
          log: options.log,
          limits: options.scriptLimits,
        })
      : undefined;
    this.#transport = new KafkaTransport(config, options.mirror);
    this.#topics = new KnownTopics(this.#transport, options.logger);
    this.#checkpoints = new CheckpointStore(this.#transport, this.#topics);
    this.#apply = new KafkaApply({
      transport: this.#transport,
      topics: this.#topics,
      strategy: new PartitionStrategy(config.partitioner as PartitionerName),
      script: this.#script,
      chunkBytes: options.chunkBytes ?? defaultChunkBytes,
      chunkMessages: options.chunkMessages,
    });
  }

  /**
   * Without a script, a batch holds each change as its default message's
   * bytes from the moment it is decoded (held-messages.ts). A script reads
   * records as objects, so with one the changes stay objects until the send.
   */
  changeBuffer(table: DestinationTable): KafkaHeld {
    return this.#script ? new ScriptedChanges() : new HeldMessages(tableFormat(table));
  }

  async check(): Promise<{ version: string }> {
    return this.#transport.withAdmin(async (admin) => {
      try {
        const cluster = await admin.metadata({ topics: [] });
        return { version: `kafka (${cluster.brokers.size} broker(s); the protocol reports no version)` };
      } catch (error) {
        throw classifyKafkaError(
          error,
          'destination: describe cluster',
          'connection',
          connectionErrorOf(admin),
        );
      }
    });
  }

  async close(): Promise<void> {
    await Promise.all([this.#script?.close(), this.#transport.close()]);
  }

  /**
   * Checks every default topic name, creates missing topics (and the checkpoint
   * topic) with the broker's default partition count and replication factor,
   * and loads the script so that a broken one fails the mirror before any data moves.
   */
  async setupTables(tables: readonly DestinationTable[]): Promise<void> {
    for (const table of tables) {
      const topic = tableFormat(table).topic;
      const problem = topicNameProblem(topic);
      if (problem) {
        throw new EngineError(
          'config',
          `destination ${formatTableName(table.destination)} cannot be a Kafka topic: ${problem}`,
        );
      }
    }
    await this.#topics.ensure(tables.map((table) => tableFormat(table).topic));
    await this.#script?.ready();
  }

  /**
   * Topics are never emptied, so none needs guarding: each is `empty` (no
   * rows of others to protect), never `absent`, which would read as a table
   * dropped under the mirror (pipeline/table-faults.ts).
   */
  async tableStates(tables: readonly DestinationTable[]): Promise<DestinationTableState[]> {
    return tables.map(() => 'empty');
  }

  /** Topics are not emptied: a load that starts over sends every row again (at least once). */
  async truncateTables(_tables: readonly DestinationTable[]): Promise<void> {}

  async writeSnapshotPartition(table: DestinationTable, copyText: Readable): Promise<number> {
    await this.#script?.ready();
    try {
      return await this.#apply.writeSnapshotPartition(table, copyText);
    } catch (error) {
      throw refusedTable(error, [table]) ?? error;
    }
  }

  async syncBatch(batch: ChangeBatch<KafkaHeld>): Promise<void> {
    const stored = await this.#checkpoints.stored(batch.mirror);
    if (stored && stored.batchId >= batch.batchId) {
      this.#logger.info({ batchId: String(batch.batchId) }, 'batch already sent, skipped');
      return;
    }
    await this.#script?.ready();
    try {
      await this.#apply.sendBatch(batch);
    } catch (error) {
      throw (
        refusedTable(
          error,
          batch.tables.map(({ table }) => table),
        ) ?? error
      );
    }
    const checkpoint: Checkpoint = {
      batchId: batch.batchId,
      lsn: batch.endLsn,
      transactionPosition: batch.transactionPosition,
    };
    await this.#checkpoints.write(batch.mirror, checkpoint, `destination: send batch ${batch.batchId}`);
  }

  async readCheckpoint(mirror: string): Promise<Checkpoint | undefined> {
    // Read as CDC starts: the producer gets ready meanwhile (transport.ts).
    this.#transport.prepareProducer();
    return this.#checkpoints.read(mirror);
  }

  /** Messages carry whatever shape a table has: nothing is refused. */
  async refuseAlteration(_alteration: TableAlteration): Promise<string | undefined> {
    return undefined;
  }

  /**
   * No DDL: later messages carry the new shape. A `schema_change` message
   * marks the point; after a crash it may come twice (delivery is at least
   * once), saying the same shape.
   */
  async alterColumns(alteration: TableAlteration): Promise<void> {
    await this.#apply.sendSchemaChange(alteration);
  }

  async removeCheckpoint(mirror: string): Promise<void> {
    await this.#checkpoints.remove(mirror);
  }

  /** The producer id of the producer made ready when CDC started (transport.ts), once it is. */
  producerReady(): Promise<bigint | undefined> {
    return this.#transport.producerReady();
  }
}

/**
 * A refusal the broker made for the topic of one table's messages (too large,
 * a record the topic does not take, no WRITE on it) as that table's fault
 * (pipeline/table-faults.ts): the table stops, the others go on. Only a
 * table's own topic is told apart; a refusal of a topic a script chose, or of
 * topics of several tables, stays the mirror's.
 */
function refusedTable(error: unknown, tables: readonly DestinationTable[]): EngineError | undefined {
  if (!isEngineError(error) || error.table !== undefined) return undefined;
  const refusal = topicRefusal(error);
  if (!refusal) return undefined;
  const owners = new Set(
    tables
      .filter((table) => refusal.topics.includes(tableFormat(table).topic))
      .map((table) => formatTableName(table.source)),
  );
  const [owner] = owners;
  if (owners.size !== 1 || owner === undefined) return undefined;
  return new EngineError(
    error.kind,
    `${error.message}: topic ${refusal.topics.join(', ')} refused ${refusal.reason}, writing the changes of ${owner}`,
    { cause: error.cause ?? error, table: owner },
  );
}

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
import type { Readable } from 'node:stream';
import type { Admin, ClusterMetadata, MessageToProduce, Producer } from '@platformatic/kafka';
import type { Logger } from 'pino';
import type { LogLevel } from '../../catalog/catalog.ts';
import { EngineError } from '../../errors.ts';
import { formatTableName } from '../../resources/mirror.ts';
import type { StreamConfig } from '../../resources/peer.ts';
import type { ScriptSource } from '../../resources/script.ts';
import type { LuaInput, SandboxLimits } from '../../scripting/lua-vm.ts';
import { RecordScript, type ScriptMessage, scriptBatchRecords } from '../../scripting/record-script.ts';
import { classifyKafkaError, kafkaErrorName } from '../classify/index.ts';
import { copyTextLineBlocks, copyTextRowBatches } from '../copy-text.ts';
import type { Destination, DestinationTableState } from '../destination.ts';
import type { ChangeBatch, ChangeBuffer, Checkpoint, DestinationTable } from '../records.ts';
import { checkpointTopicConfig, deleteCheckpoint, readCheckpoint, writeCheckpoint } from './checkpoints.ts';
import { ChunkSender, type Outgoing } from './chunk-sender.ts';
import { connectionErrorOf, createStreamAdmin, createStreamFetcher, createStreamProducer } from './client.ts';
import { HeldMessages } from './held-messages.ts';
import {
  type ChangeRecord,
  changeRecord,
  snapshotRecord,
  type TableFormat,
  tableFormat,
} from './message-format.ts';
import { type PartitionerName, PartitionStrategy, type TopicPartitions } from './partitioners.ts';
import { checkpointTopic, topicNameProblem } from './topics.ts';

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

// Below the broker's default message.max.bytes (1 MiB), which bounds one
// partition's record batch in a request; a record's framing is counted too.
export const defaultChunkBytes = 512 * 1024;
export const recordOverheadBytes = 70;
const requestTimeoutMs = 30_000;
/** What the brokers answer about a topic created a moment ago, until its partitions have leaders. */
const topicsSettling = new Set(['UNKNOWN_TOPIC_OR_PARTITION', 'LEADER_NOT_AVAILABLE']);
const checkpointReadTimeoutMs = 60_000;

/** Where a batch's records go, in order; `add` makes a promise only when it must wait. */
interface RecordSink {
  add(format: TableFormat, record: ChangeRecord): Promise<void> | undefined;
  flush(): Promise<void>;
}

export class KafkaDestination implements Destination {
  readonly #options: KafkaDestinationOptions;
  readonly #strategy: PartitionStrategy;
  readonly #script: RecordScript | undefined;
  readonly #chunkBytes: number;
  readonly #config: StreamConfig;
  readonly #topics = new Map<string, TopicPartitions>();
  #producer: Promise<Producer<Buffer, Buffer, Buffer, Buffer>> | undefined;
  /** The producer made ready as CDC started (readCheckpoint), to its producer id. */
  #producerReady: Promise<bigint | undefined> | undefined;
  /** The last checkpoint read or written: undefined until known, null when there is none. */
  #checkpoint: Checkpoint | null | undefined;
  /**
   * Without a script, a batch holds each change as its default message's
   * bytes from the moment it is decoded (held-messages.ts). A script reads
   * records as objects, so with one the changes stay objects until the send.
   */
  readonly changeBuffer: ((table: DestinationTable) => HeldMessages) | undefined;

  constructor(config: StreamConfig, options: KafkaDestinationOptions) {
    this.#options = options;
    this.#strategy = new PartitionStrategy(config.partitioner as PartitionerName);
    this.#script = options.script
      ? new RecordScript(options.script, {
          logger: options.logger,
          log: options.log,
          limits: options.scriptLimits,
        })
      : undefined;
    this.#chunkBytes = options.chunkBytes ?? defaultChunkBytes;
    this.#config = config;
    this.changeBuffer = this.#script ? undefined : (table) => new HeldMessages(tableFormat(table));
  }

  async check(): Promise<{ version: string }> {
    return this.#withAdmin(async (admin) => {
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
    const producer = this.#producer;
    this.#producer = undefined;
    this.#producerReady = undefined;
    await Promise.all([
      this.#script?.close(),
      producer?.then((connected) => connected.close()).catch(() => {}),
    ]);
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
    await this.#ensureTopics(tables.map((table) => tableFormat(table).topic));
    await this.#script?.ready();
  }

  /** Topics are never emptied, so none needs guarding. */
  async tableStates(tables: readonly DestinationTable[]): Promise<DestinationTableState[]> {
    return tables.map(() => 'absent');
  }

  /** Topics are not emptied: a load that starts over sends every row again (at least once). */
  async truncateTables(_tables: readonly DestinationTable[]): Promise<void> {}

  async writeSnapshotPartition(table: DestinationTable, copyText: Readable): Promise<number> {
    await this.#script?.ready();
    const format = tableFormat(table);
    // A snapshot partition's chunks are batches of their own (Sticky moves on between them).
    const sender = new ChunkSender({
      send: (chunk) => this.#send(chunk, `destination: load ${format.topic}`),
      chunkBytes: this.#chunkBytes,
      chunkMessages: this.#options.chunkMessages,
      newAssigner: () => this.#strategy.batch(),
      assignerPerChunk: true,
    });
    let rowCount = 0;
    if (!this.#script && HeldMessages.writesFromBytes(format)) {
      // Each block's messages written from its COPY text (row-json.ts), as views of their bytes.
      for await (const block of copyTextLineBlocks(copyText)) {
        const held = new HeldMessages(format);
        rowCount += held.addSnapshotLines(block);
        await this.#addHeld(held, sender);
      }
      await sender.finish();
      return rowCount;
    }
    const records = this.#recordSink(sender);
    for await (const rows of copyTextRowBatches(copyText, table)) {
      for (const row of rows) {
        rowCount++;
        const adding = records.add(format, snapshotRecord(format, row));
        if (adding) await adding;
      }
    }
    await records.flush();
    await sender.finish();
    return rowCount;
  }

  async syncBatch(batch: ChangeBatch): Promise<void> {
    const stored = await this.#storedCheckpoint(batch.mirror);
    if (stored && stored.batchId >= batch.batchId) {
      this.#options.logger.info({ batchId: String(batch.batchId) }, 'batch already sent, skipped');
      return;
    }
    await this.#script?.ready();
    const assigner = this.#strategy.batch();
    const what = `destination: send batch ${batch.batchId}`;
    const sender = new ChunkSender({
      send: (chunk) => this.#send(chunk, what),
      chunkBytes: this.#chunkBytes,
      chunkMessages: this.#options.chunkMessages,
      newAssigner: () => assigner,
      assignerPerChunk: false,
    });
    const records = this.#recordSink(sender);
    for (const { table, held, changes } of batch.tables) {
      if (held !== undefined) await this.#addHeld(held, sender);
      const format = tableFormat(table);
      for (const change of changes) {
        const adding = records.add(format, changeRecord(format, change));
        if (adding) await adding;
      }
    }
    await records.flush();
    await sender.finish();
    const checkpoint: Checkpoint = {
      batchId: batch.batchId,
      lsn: batch.endLsn,
      transactionPosition: batch.transactionPosition,
    };
    try {
      await writeCheckpoint(await this.#connectedProducer(), batch.mirror, checkpoint);
    } catch (error) {
      const connectionError = await this.#producerConnectionError();
      this.#resetProducer();
      throw classifyKafkaError(error, `${what}: write checkpoint`, 'destination_write', connectionError);
    }
    this.#checkpoint = checkpoint;
  }

  async readCheckpoint(mirror: string): Promise<Checkpoint | undefined> {
    // Read as CDC starts: the producer gets ready meanwhile, so that the first
    // batch does not wait for its library to load, connect and get a producer id.
    this.#producerReady ??= this.#prepareProducer();
    return this.#withAdmin(async (admin) => {
      const fetcher = await createStreamFetcher(this.#config, {
        clientId: this.#clientId(),
        requestTimeoutMs,
      });
      try {
        const checkpoint = await readCheckpoint(admin, fetcher, mirror, checkpointReadTimeoutMs);
        this.#checkpoint = checkpoint ?? null;
        return checkpoint;
      } catch (error) {
        const connectionError = connectionErrorOf(fetcher) ?? connectionErrorOf(admin);
        throw classifyKafkaError(error, 'destination: read checkpoint', 'destination_write', connectionError);
      } finally {
        await fetcher.close().catch(() => {});
      }
    });
  }

  /** New columns simply appear in later messages: nothing to do. */
  async addColumns(_table: DestinationTable, _columns: DestinationTable['columns']): Promise<void> {}

  async removeCheckpoint(mirror: string): Promise<void> {
    try {
      await this.#ensureTopics([]);
      await deleteCheckpoint(await this.#connectedProducer(), mirror);
      this.#checkpoint = null;
    } catch (error) {
      const connectionError = await this.#producerConnectionError();
      this.#resetProducer();
      throw classifyKafkaError(error, 'destination: remove checkpoint', 'destination_write', connectionError);
    }
  }

  async #storedCheckpoint(mirror: string): Promise<Checkpoint | null> {
    if (this.#checkpoint === undefined) await this.readCheckpoint(mirror);
    return this.#checkpoint ?? null;
  }

  /**
   * Where records go to become messages for `sender`, in order: without a
   * script at once; with one, in runs of records, so that the script's thread
   * is crossed once per run. `flush` sends what is still waiting.
   */
  #recordSink(sender: ChunkSender): RecordSink {
    const script = this.#script;
    if (!script) {
      return {
        add: (format, record) => this.#add(format, record, undefined, sender),
        flush: async () => {},
      };
    }
    let waiting: { format: TableFormat; record: ChangeRecord }[] = [];
    const flush = async () => {
      if (waiting.length === 0) return;
      const run = waiting;
      waiting = [];
      const wanted = await script.transform(run.map(({ record }) => luaRecord(record)));
      for (const [index, { format, record }] of run.entries()) {
        const adding = this.#add(format, record, wanted[index] ?? [], sender);
        if (adding) await adding;
      }
    };
    return {
      add: (format, record) => {
        waiting.push({ format, record });
        return waiting.length >= scriptBatchRecords ? flush() : undefined;
      },
      flush,
    };
  }

  /**
   * Adds the messages one record becomes (the script's `wanted`, else the
   * default one) to `sender`. Synchronous unless a topic must be looked up or
   * a full chunk sent: then it returns the promise to wait for.
   */
  #add(
    format: TableFormat,
    record: ChangeRecord,
    wanted: readonly ScriptMessage[] | undefined,
    sender: ChunkSender,
  ): Promise<void> | undefined {
    if (wanted === undefined) {
      const topic = this.#topics.get(format.topic);
      if (!topic) return this.#unknownTopic(format.topic, () => this.#add(format, record, wanted, sender));
      this.#push(sender, topic, record, record.key, record.json, undefined, undefined);
      return sender.sendIfFull();
    }
    for (let index = 0; index < wanted.length; index++) {
      const message = wanted[index] as ScriptMessage;
      const topicName = message.topic ?? format.topic;
      if (message.topic !== undefined) {
        const problem = topicNameProblem(topicName);
        if (problem) {
          throw new EngineError(
            'script',
            `script ${this.#script?.name}: "${topicName.slice(0, 300)}" is not a Kafka topic name: ${problem}`,
          );
        }
      }
      const topic = this.#topics.get(topicName);
      if (!topic) {
        // The messages before this one are in the chunk already: go on from this one.
        const rest = wanted.slice(index);
        return this.#unknownTopic(topicName, () => this.#add(format, record, rest, sender));
      }
      this.#push(
        sender,
        topic,
        record,
        message.key === undefined ? record.key : message.key,
        message.value === undefined ? record.json : message.value,
        message.headers,
        message.partition,
      );
    }
    return sender.sendIfFull();
  }

  /** Creates or looks up a topic not yet known, then goes on with `then`. */
  async #unknownTopic(name: string, then: () => Promise<void> | undefined): Promise<void> {
    await this.#topicOf(name);
    await then();
  }

  /** The messages a table's changes became as they were decoded (held-messages.ts), in order. */
  async #addHeld(held: ChangeBuffer, sender: ChunkSender): Promise<void> {
    if (!(held instanceof HeldMessages)) {
      throw new EngineError('internal', 'changes held by another destination were handed to Kafka');
    }
    const topic = this.#topics.get(held.format.topic) ?? (await this.#topicOf(held.format.topic));
    for (const message of held.messages()) {
      this.#pushBytes(sender, topic, message.truncate, message.key, message.value, undefined, 0, undefined);
      const sending = sender.sendIfFull();
      if (sending) await sending;
    }
  }

  /** Encodes one message and puts it in the chunk (#pushBytes). */
  #push(
    sender: ChunkSender,
    topic: TopicPartitions,
    record: ChangeRecord,
    keyText: string | null,
    valueText: string | null,
    headerTexts: ScriptMessage['headers'],
    requestedPartition: number | undefined,
  ): void {
    // Encoded once here: the partitioner hashes the key's bytes, the chunk bound
    // counts them, and the producer writes Buffers as they are instead of encoding again.
    const key = keyText === null ? null : Buffer.from(keyText);
    const value = valueText === null ? null : Buffer.from(valueText);
    let headers: Map<Buffer, Buffer> | undefined;
    let headerBytes = 0;
    if (headerTexts) {
      // A repeated name is one Buffer key per value: the producer writes every entry.
      headers = new Map<Buffer, Buffer>();
      for (const [name, text] of Object.entries(headerTexts)) {
        for (const one of typeof text === 'string' ? [text] : text) {
          const nameBytes = Buffer.from(name);
          const oneBytes = Buffer.from(one);
          headers.set(nameBytes, oneBytes);
          headerBytes += nameBytes.length + oneBytes.length + 2;
        }
      }
    }
    this.#pushBytes(
      sender,
      topic,
      record.kind === 'truncate',
      key,
      value,
      headers,
      headerBytes,
      requestedPartition,
    );
  }

  /** Puts one message in the chunk, once per partition for a key-less truncate. */
  #pushBytes(
    sender: ChunkSender,
    topic: TopicPartitions,
    truncate: boolean,
    key: Buffer | null,
    value: Buffer | null,
    headers: Map<Buffer, Buffer> | undefined,
    headerBytes: number,
    requestedPartition: number | undefined,
  ): void {
    const bytes =
      recordOverheadBytes +
      (key === null ? 0 : key.length) +
      (value === null ? 0 : value.length) +
      headerBytes;
    // A truncate concerns every key: its key-less messages go to every partition,
    // so a consumer of any partition sees it in order with that partition's rows.
    const everywhere =
      truncate && key === null && !(this.#strategy.name === 'Manual' && requestedPartition !== undefined);
    if (everywhere) {
      for (const { partitionId } of topic.partitions) {
        sender.push({ topic: topic.topic, key, value, headers, partition: partitionId, bytes });
      }
    } else {
      const partition = sender.assigner().assign(topic, key, requestedPartition);
      sender.push({ topic: topic.topic, key, value, headers, partition, bytes });
    }
  }

  /** Sends one chunk and waits for the broker's acknowledgement of all of it. */
  async #send(chunk: readonly Outgoing[], what: string): Promise<void> {
    try {
      await (await this.#connectedProducer()).send({
        compression: this.#config.compression,
        // Handed over as they are: a null key or value is written as Kafka's null
        // (length -1), absent headers as none; the types want Buffers and a Map.
        messages: chunk as unknown as MessageToProduce<Buffer, Buffer, Buffer, Buffer>[],
      });
    } catch (error) {
      const connectionError = await this.#producerConnectionError();
      // A failed idempotent producer may hold sequence numbers the broker never saw.
      this.#resetProducer();
      this.#topics.clear();
      throw classifyKafkaError(error, what, 'destination_write', connectionError);
    } finally {
      for (const message of chunk) this.#strategy.settled(message.topic, message.partition, 1);
    }
  }

  async #topicOf(name: string): Promise<TopicPartitions> {
    await this.#ensureTopics([name]);
    const topic = this.#topics.get(name);
    if (!topic) throw new EngineError('destination_write', `destination: topic ${name} has no partitions`);
    return topic;
  }

  /** Creates the topics (and the checkpoint topic) that do not exist and caches their partitions. */
  async #ensureTopics(names: readonly string[]): Promise<void> {
    await this.#withAdmin((admin) => this.#ensureTopicsWith(admin, names));
  }

  async #ensureTopicsWith(admin: Admin, names: readonly string[]): Promise<void> {
    const wanted = [...new Set(names)];
    try {
      const existing = new Set(await admin.listTopics());
      const missing = wanted.filter((name) => !existing.has(name) && name !== checkpointTopic);
      // Partitions and replication: the broker's num.partitions and default.replication.factor.
      if (missing.length > 0) await admin.createTopics({ topics: missing });
      if (!existing.has(checkpointTopic)) {
        await admin.createTopics(checkpointTopicConfig);
        missing.push(checkpointTopic);
      }
      if (missing.length > 0) this.#options.logger.info({ topics: missing }, 'created topics');
      // Created topics are waited on too, for their leaders, before anything is sent to them.
      const unknown = [...new Set([...names.filter((name) => !this.#topics.has(name)), ...missing])];
      if (unknown.length > 0) await this.#loadPartitions(admin, unknown);
    } catch (error) {
      // Another writer may have created a topic between the list and the create.
      if (kafkaErrorName(error) === 'TOPIC_ALREADY_EXISTS') return this.#ensureTopicsWith(admin, names);
      const what = `destination: create topics ${names.join(', ')}`;
      throw classifyKafkaError(error, what, 'destination_write', connectionErrorOf(admin));
    }
  }

  /**
   * Caches the partitions of `names` once each has a leader: a topic just
   * created gets its leaders a moment later, and a partition without one
   * would refuse the first send.
   */
  async #loadPartitions(admin: Admin, names: readonly string[]): Promise<void> {
    const deadline = Date.now() + requestTimeoutMs;
    for (let attempt = 0; ; attempt++) {
      let metadata: ClusterMetadata | undefined;
      try {
        metadata = await admin.metadata({ topics: [...names], forceUpdate: true });
      } catch (error) {
        // A topic just created may be unknown to the broker answering for a moment.
        if (!topicsSettling.has(kafkaErrorName(error) ?? '') || Date.now() > deadline) throw error;
      }
      const ready =
        metadata !== undefined &&
        names.every((name) => metadata.topics.get(name)?.partitions.every((p) => p.leader >= 0));
      if (metadata !== undefined && (ready || Date.now() > deadline)) {
        for (const [name, topic] of metadata.topics) {
          const partitions = topic.partitions.map((partition, partitionId) => ({
            partitionId,
            leader: partition.leader,
          }));
          if (partitions.length > 0) this.#topics.set(name, { topic: name, partitions });
        }
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(50 * 2 ** attempt, 500)));
    }
  }

  #clientId(): string {
    return `tributary-${this.#options.mirror}`.slice(0, 100);
  }

  /**
   * Runs `work` with an admin client of its own, closed after it: admin work
   * is rare (the check, the checkpoint read at start, a topic not seen
   * before), so no connection is kept for it between uses.
   */
  async #withAdmin<T>(work: (admin: Admin) => Promise<T>): Promise<T> {
    const admin = await createStreamAdmin(this.#config, { clientId: this.#clientId(), requestTimeoutMs });
    try {
      return await work(admin);
    } finally {
      await admin.close().catch(() => {});
    }
  }

  /**
   * The producer id of the producer made ready when CDC started (readCheckpoint),
   * once it is; undefined when none was prepared or preparing it failed (the
   * first send then tries again).
   */
  producerReady(): Promise<bigint | undefined> {
    return this.#producerReady ?? Promise.resolve(undefined);
  }

  async #prepareProducer(): Promise<bigint | undefined> {
    try {
      const producer = await this.#connectedProducer();
      await producer.initIdempotentProducer({});
      return producer.producerId;
    } catch {
      return undefined;
    }
  }

  /** The producer connects on its first request; a failed one is replaced by a new one. */
  #connectedProducer(): Promise<Producer<Buffer, Buffer, Buffer, Buffer>> {
    this.#producer ??= createStreamProducer(this.#config, {
      clientId: this.#clientId(),
      requestTimeoutMs,
    });
    return this.#producer;
  }

  /** The last error the producer's connections reported: why a send failed when it only says "closed". */
  async #producerConnectionError(): Promise<Error | undefined> {
    const producer = await this.#producer?.catch(() => undefined);
    return producer && connectionErrorOf(producer);
  }

  #resetProducer(): void {
    const producer = this.#producer;
    this.#producer = undefined;
    this.#producerReady = undefined;
    producer?.then((connected) => connected.close()).catch(() => {});
  }
}

/** The record as a script sees it (docs/scripts.md). */
export function luaRecord(record: ChangeRecord): LuaInput {
  const { document } = record;
  const unchanged: Record<string, boolean> = {};
  for (const name of document.unchanged_columns) unchanged[name] = true;
  return {
    kind: document.kind,
    source: document.source,
    target: document.target,
    old: document.old ?? undefined,
    new: document.new ?? undefined,
    row: document.new ?? document.old ?? undefined,
    key: record.key ?? undefined,
    checkpoint: record.commitLsn ?? undefined,
    lsn: document.lsn ?? undefined,
    commit_time: document.commit_time ?? undefined,
    xid: document.xid ?? undefined,
    unchanged_columns: unchanged,
  } as LuaInput;
}

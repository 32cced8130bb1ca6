// A Kafka destination's writes: a snapshot partition's rows and a batch's
// changes become messages (their default ones written by message-json.ts, held
// as bytes: held-messages.ts; a script's results: script-records.ts), get
// their partition (partitioners.ts) and go to
// the broker in chunks of bounded size (chunk-sender.ts).
//
// Contract:
// - Messages are sent in the order of the rows and changes, one chunk after
//   the other; each method resolves once every chunk is acknowledged, so the
//   caller may then write the checkpoint (destination.ts).
// - A failed send rejects with the transport's classified error and forgets
//   the cached partitions; nothing is retried here (the pipeline replays the
//   batch from the last checkpoint: at least once).
// - A truncate's key-less messages go to every partition of the topic.
// - A script's topic that is not a Kafka topic name, or is an internal topic, fails with EngineError 'script'.
// - Snapshot partitions may be written concurrently; batches are not.
import type { Readable } from 'node:stream';
import { EngineError } from '../../errors.ts';
import type { RecordScript, ScriptMessage } from '../../scripting/record-script.ts';
import { copyTextLineBlocks, copyTextRowBatches } from '../copy-text.ts';
import type { ChangeBatch, ColumnChange, DestinationTable, TableAlteration } from '../records.ts';
import { ChunkSender, type Outgoing } from './chunk-sender.ts';
import { HeldMessages, type KafkaHeld } from './held-messages.ts';
import { type TableFormat, tableFormat } from './message-format.ts';
import type { BatchAssigner, PartitionStrategy, TopicPartitions } from './partitioners.ts';
import { type ChangeRecord, changeRecord, recordSink, snapshotRecord } from './script-records.ts';
import { type KnownTopics, topicNameProblem } from './topics.ts';
import type { KafkaTransport } from './transport.ts';

// Below the broker's default message.max.bytes (1 MiB), which bounds one
// partition's record batch in a request; a record's framing is counted too.
export const defaultChunkBytes = 512 * 1024;
export const recordOverheadBytes = 70;

export interface KafkaApplyOptions {
  readonly transport: KafkaTransport;
  readonly topics: KnownTopics;
  readonly strategy: PartitionStrategy;
  /** The mirror's script, loaded (ready) before each write; undefined without one. */
  readonly script: RecordScript | undefined;
  /** Upper bound of the key, value and header bytes of one produce request. */
  readonly chunkBytes: number;
  /** Upper bound of the messages of one produce request. */
  readonly chunkMessages: number | undefined;
}

export class KafkaApply {
  readonly #options: KafkaApplyOptions;
  readonly #topics: KnownTopics;
  readonly #strategy: PartitionStrategy;

  constructor(options: KafkaApplyOptions) {
    this.#options = options;
    this.#topics = options.topics;
    this.#strategy = options.strategy;
  }

  /** Sends one snapshot partition's rows (COPY text) and returns the row count. */
  async writeSnapshotPartition(table: DestinationTable, copyText: Readable): Promise<number> {
    const format = tableFormat(table);
    // A snapshot partition's chunks are batches of their own (Sticky moves on between them).
    const sender = this.#sender(`destination: load ${format.topic}`, () => this.#strategy.batch(), true);
    let rowCount = 0;
    if (!this.#options.script) {
      // Each block's messages written from its COPY text (message-json.ts), as views of their bytes.
      for await (const block of copyTextLineBlocks(copyText)) {
        const held = new HeldMessages(format);
        rowCount += held.addSnapshotLines(block);
        await this.#addHeld(held, sender);
      }
      await sender.finish();
      return rowCount;
    }
    const records = recordSink(this.#options.script, (f, record, wanted) =>
      this.#add(f, record, wanted, sender),
    );
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

  /**
   * Marks a change of a table's shape in its default topic: a key-less
   * `schema_change` message on every partition, after every message of the
   * old shape and before any of the new (docs/kafka.md, "Schema changes").
   */
  async sendSchemaChange({ after, changes }: TableAlteration): Promise<void> {
    const format = tableFormat(after);
    const topic = this.#topics.get(format.topic) ?? (await this.#topics.of(format.topic));
    const value = Buffer.from(JSON.stringify(schemaChangeDocument(after, format.topic, changes)));
    const sender = this.#sender(
      `destination: mark a schema change in ${format.topic}`,
      () => this.#strategy.batch(),
      false,
    );
    this.#pushBytes(sender, topic, true, null, value, undefined, 0, undefined);
    await sender.finish();
  }

  /** Sends a batch's messages, in order; the checkpoint is the caller's. */
  async sendBatch(batch: ChangeBatch<KafkaHeld>): Promise<void> {
    const assigner = this.#strategy.batch();
    const sender = this.#sender(`destination: send batch ${batch.batchId}`, () => assigner, false);
    const records = recordSink(this.#options.script, (format, record, wanted) =>
      this.#add(format, record, wanted, sender),
    );
    for (const { table, held } of batch.tables) {
      if (held.form === 'messages') {
        await this.#addHeld(held, sender);
        continue;
      }
      const format = tableFormat(table);
      for (const change of held.changes) {
        const adding = records.add(format, changeRecord(format, change));
        if (adding) await adding;
      }
    }
    await records.flush();
    await sender.finish();
  }

  #sender(what: string, newAssigner: () => BatchAssigner, assignerPerChunk: boolean): ChunkSender {
    return new ChunkSender({
      send: (chunk) => this.#send(chunk, what),
      chunkBytes: this.#options.chunkBytes,
      chunkMessages: this.#options.chunkMessages,
      newAssigner,
      assignerPerChunk,
    });
  }

  async #send(chunk: readonly Outgoing[], what: string): Promise<void> {
    try {
      await this.#options.transport.send(chunk, what);
    } catch (error) {
      this.#topics.forget();
      throw error;
    } finally {
      for (const message of chunk) this.#strategy.settled(message.topic, message.partition, 1);
    }
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
            `script ${this.#options.script?.name}: "${topicName.slice(0, 300)}" is not a topic it may write: ${problem}`,
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
    await this.#topics.of(name);
    await then();
  }

  /** The messages a table's changes became as they were decoded (held-messages.ts), in order. */
  async #addHeld(held: HeldMessages, sender: ChunkSender): Promise<void> {
    const topic = this.#topics.get(held.format.topic) ?? (await this.#topics.of(held.format.topic));
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
}

/** The value of a `schema_change` message: what changed, and the columns messages carry from here on. */
function schemaChangeDocument(table: DestinationTable, topic: string, changes: readonly ColumnChange[]) {
  return {
    kind: 'schema_change',
    source: { schema: table.source.schema, table: table.source.table },
    target: topic,
    lsn: null,
    commit_time: null,
    xid: null,
    old: null,
    new: null,
    changes: changes.map((change) => {
      if (change.kind === 'add')
        return { change: 'add', column: change.column.name, type: change.column.typeName };
      if (change.kind === 'drop') return { change: 'drop', column: change.name };
      if (change.kind === 'rename') return { change: 'rename', column: change.from, to: change.to };
      return {
        change: 'retype',
        column: change.name,
        from: change.before.typeName,
        type: change.after.typeName,
      };
    }),
    columns: table.columns.map((column) => ({ name: column.name, type: column.typeName })),
  };
}

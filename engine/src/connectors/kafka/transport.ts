// The connections of a Kafka destination, all of one library
// (@platformatic/kafka, client.ts): one producer kept for the mirror's life,
// and admin clients and checkpoint fetchers opened for one task each.
//
// Contract:
// - `send` resolves once the broker acknowledged every message of the chunk
//   (idempotent, acks=all, one request in flight: a retried request neither
//   doubles nor reorders a partition's messages). It rejects with a
//   classified EngineError (classify/kafka.ts), after replacing the producer:
//   a failed idempotent producer may hold sequence numbers the broker never
//   saw, so the next send starts a new producer session.
// - The producer connects on its first request. `prepareProducer` (called as
//   CDC starts) gets it ready meanwhile, so that the first batch does not wait
//   for the library to load, connect and get a producer id.
// - `withAdmin` and `withFetcher` run their task with a client of its own,
//   closed after it: admin work is rare (the check, the checkpoint read at
//   start, a topic not seen before), so no connection is kept between uses.
//   What fails inside them is classified by the caller, which knows the task.
// - `close` releases the producer; safe to call twice. A later send opens a new one.
import type { Admin, Consumer, MessageToProduce, Producer } from '@platformatic/kafka';
import type { StreamConfig } from '../../resources/peer.ts';
import { classifyKafkaError } from '../classify/index.ts';
import type { Outgoing } from './chunk-sender.ts';
import { connectionErrorOf, createStreamAdmin, createStreamFetcher, createStreamProducer } from './client.ts';

export type BufferProducer = Producer<Buffer, Buffer, Buffer, Buffer>;
export type BufferFetcher = Consumer<Buffer, Buffer, Buffer, Buffer>;

export const requestTimeoutMs = 30_000;

export class KafkaTransport {
  readonly #config: StreamConfig;
  readonly #clientId: string;
  #producer: Promise<BufferProducer> | undefined;
  /** The producer made ready as CDC started (prepareProducer), to its producer id. */
  #producerReady: Promise<bigint | undefined> | undefined;

  constructor(config: StreamConfig, mirror: string) {
    this.#config = config;
    this.#clientId = `tributary-${mirror}`.slice(0, 100);
  }

  /** Sends one chunk and waits for the broker's acknowledgement of all of it. */
  async send(chunk: readonly Outgoing[], what: string): Promise<void> {
    try {
      await (await this.producer()).send({
        compression: this.#config.compression,
        // Handed over as they are: a null key or value is written as Kafka's null
        // (length -1), absent headers as none; the types want Buffers and a Map.
        messages: chunk as unknown as MessageToProduce<Buffer, Buffer, Buffer, Buffer>[],
      });
    } catch (error) {
      throw await this.producerFailure(error, what);
    }
  }

  /**
   * The classified error of a failed producer request, after the producer is
   * replaced: the producer's connections say why when the error only says "closed".
   */
  async producerFailure(error: unknown, what: string) {
    const producer = await this.#producer?.catch(() => undefined);
    const connectionError = producer && connectionErrorOf(producer);
    this.#resetProducer();
    return classifyKafkaError(error, what, 'destination_write', connectionError);
  }

  /** The producer, connecting on its first request; a failed one is replaced by a new one. */
  producer(): Promise<BufferProducer> {
    this.#producer ??= createStreamProducer(this.#config, { clientId: this.#clientId, requestTimeoutMs });
    return this.#producer;
  }

  /** Starts getting the producer ready, once (see the contract above). */
  prepareProducer(): void {
    this.#producerReady ??= this.#prepare();
  }

  /**
   * The producer id of the producer made ready by prepareProducer, once it is;
   * undefined when none was prepared or preparing it failed (the first send
   * then tries again).
   */
  producerReady(): Promise<bigint | undefined> {
    return this.#producerReady ?? Promise.resolve(undefined);
  }

  async #prepare(): Promise<bigint | undefined> {
    try {
      const producer = await this.producer();
      await producer.initIdempotentProducer({});
      return producer.producerId;
    } catch {
      return undefined;
    }
  }

  /** Runs `work` with an admin client of its own, closed after it. */
  async withAdmin<T>(work: (admin: Admin) => Promise<T>): Promise<T> {
    const admin = await createStreamAdmin(this.#config, { clientId: this.#clientId, requestTimeoutMs });
    try {
      return await work(admin);
    } finally {
      await admin.close().catch(() => {});
    }
  }

  /** Runs `work` with a group-less fetcher of its own (checkpoints.ts), closed after it. */
  async withFetcher<T>(work: (fetcher: BufferFetcher) => Promise<T>): Promise<T> {
    const fetcher = await createStreamFetcher(this.#config, { clientId: this.#clientId, requestTimeoutMs });
    try {
      return await work(fetcher);
    } finally {
      await fetcher.close().catch(() => {});
    }
  }

  async close(): Promise<void> {
    const producer = this.#producer;
    this.#producer = undefined;
    this.#producerReady = undefined;
    await producer?.then((connected) => connected.close()).catch(() => {});
  }

  #resetProducer(): void {
    const producer = this.#producer;
    this.#producer = undefined;
    this.#producerReady = undefined;
    producer?.then((connected) => connected.close()).catch(() => {});
  }
}

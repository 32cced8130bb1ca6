// Clients of a stream peer, all @platformatic/kafka: the producer of a
// mirror's messages (twice the messages per second of kafkajs for half the
// CPU; docs/benchmarks.md, "Kafka producers"), an admin for topics and
// metadata, and a consumer that only fetches, for the checkpoint read. One
// library for every connection: the same TLS, SASL and error shapes
// (classify/kafka.ts) wherever the engine talks to the brokers.
//
// The library is loaded on first use: it adds about 57 MiB of resident memory
// (a Node process importing it alone: 41 → 98 MiB), which a process without a
// stream peer (standalone mode with only PostgreSQL mirrors) should not pay
// (docs/startup.md, Memory).
import type { ConnectionOptions } from 'node:tls';
import type { Admin, BaseOptions, ConnectionPoolEventPayload, Consumer, Producer } from '@platformatic/kafka';
import type { StreamConfig } from '../../resources/peer.ts';

let platformaticKafka: Promise<typeof import('@platformatic/kafka')> | undefined;

function loadKafka(): Promise<typeof import('@platformatic/kafka')> {
  platformaticKafka ??= import('@platformatic/kafka');
  return platformaticKafka;
}

/**
 * The TLS of a connection: `false` without TLS; with TLS, the peer's root CA
 * replaces the system's CAs and its client certificate is presented. Server
 * certificates are always verified (Node's default, never turned off here).
 */
export function streamTlsOptions(config: StreamConfig): false | true | ConnectionOptions {
  if (config.disableTls) return false;
  if (!config.rootCa && !config.certificate) return true;
  return {
    ...(config.rootCa ? { ca: config.rootCa } : {}),
    ...(config.certificate && config.privateKey ? { cert: config.certificate, key: config.privateKey } : {}),
  };
}

/** What every client of the library emits as it connects to a broker. */
interface BrokerEvents {
  on(event: 'client:broker:connect', listener: (payload: ConnectionPoolEventPayload) => void): unknown;
}

/** The last error a connection of each client reported, by client. */
const connectionErrors = new WeakMap<object, Error>();

/**
 * Records the errors the client's connections report. A request in flight
 * when a connection closes fails with a bare "Connection closed"; the reason
 * (a broker refusing the client certificate sends a TLS alert just after the
 * handshake) comes only as the connection's own error event.
 */
function watchConnections<T extends BrokerEvents>(client: T): T {
  client.on('client:broker:connect', ({ connection }) => {
    connection.on('error', (error: Error) => connectionErrors.set(client, error));
  });
  return client;
}

/** The last error a connection of `client` reported, if any (classify/kafka.ts reads it for a bare close). */
export function connectionErrorOf(client: object): Error | undefined {
  return connectionErrors.get(client);
}

/**
 * What every client of the peer shares: brokers, TLS, SASL, the connect and
 * request timeouts, and topics never created by a request that names them.
 */
function baseOptions(
  config: StreamConfig,
  options: { clientId: string; timeoutMs?: number; requestTimeoutMs: number },
): BaseOptions {
  const tls = streamTlsOptions(config);
  return {
    clientId: options.clientId,
    bootstrapBrokers: [...config.servers],
    ...(tls === false ? {} : { tls: tls === true ? {} : tls }),
    ...(config.username === '' || config.sasl === ''
      ? {}
      : { sasl: { mechanism: config.sasl, username: config.username, password: config.password } }),
    connectTimeout: options.timeoutMs ?? 10_000,
    requestTimeout: options.requestTimeoutMs,
    timeout: options.requestTimeoutMs,
    autocreateTopics: false,
  };
}

/**
 * An admin client of the peer (topics, metadata). It connects on its first
 * request; the caller closes it.
 */
export async function createStreamAdmin(
  config: StreamConfig,
  options: { clientId: string; timeoutMs?: number; requestTimeoutMs?: number },
): Promise<Admin> {
  const { Admin } = await loadKafka();
  const requestTimeoutMs = options.requestTimeoutMs ?? options.timeoutMs ?? 30_000;
  return watchConnections(
    new Admin({ ...baseOptions(config, { ...options, requestTimeoutMs }), retries: 1 }),
  );
}

/**
 * A consumer of the peer used only for `fetch` and `listOffsets`, which need
 * no group: it never joins the group its options must name. The caller closes it.
 */
export async function createStreamFetcher(
  config: StreamConfig,
  options: { clientId: string; timeoutMs?: number; requestTimeoutMs: number },
): Promise<Consumer<Buffer, Buffer, Buffer, Buffer>> {
  const { Consumer } = await loadKafka();
  return watchConnections(
    new Consumer<Buffer, Buffer, Buffer, Buffer>({
      ...baseOptions(config, options),
      groupId: 'tributary-checkpoint-reader',
      retries: 1,
    }),
  );
}

/**
 * The producer of a stream peer's messages: idempotent with acks=all (it then
 * keeps one request in flight per broker, so a retried request neither
 * doubles nor reorders a partition's messages). Keys, values and header
 * values are Buffers. No compression here: each send names its own
 * (checkpoints stay uncompressed, so any reader decodes them).
 */
export async function createStreamProducer(
  config: StreamConfig,
  options: { clientId: string; timeoutMs?: number; requestTimeoutMs: number },
): Promise<Producer<Buffer, Buffer, Buffer, Buffer>> {
  const { ProduceAcks, Producer } = await loadKafka();
  return watchConnections(
    new Producer<Buffer, Buffer, Buffer, Buffer>({
      ...baseOptions(config, options),
      idempotent: true,
      acks: ProduceAcks.ALL,
      retries: 5,
      retryDelay: 300,
    }),
  );
}

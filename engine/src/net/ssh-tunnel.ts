// Connections over SSH. The PostgreSQL driver takes a stream of our own in
// place of its socket (pg's `stream` option), so each of its connections is an
// SSH direct-tcpip channel handed to it directly: no local port that another
// user of the host could reach while the tunnel is open (docs/security.md,
// "SSH tunnels").
import { createHash } from 'node:crypto';
import { Duplex } from 'node:stream';
import type { ClientChannel, ConnectConfig, Client as SshClient } from 'ssh2';
import { classifySshError } from '../connectors/classify/index.ts';
import { EngineError } from '../errors.ts';

/** Key types of OpenSSH public keys (PROTOCOL, RFC 4253 section 6.6, RFC 5656, RFC 8709). */
const keyTypes =
  /^(ssh-(rsa|dss|ed25519|ed448)|ecdsa-sha2-nistp(256|384|521)|sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com)$/;

/**
 * The key blob of a public key line: `type base64 [comment]`, as in
 * authorized_keys, optionally preceded by host names as in known_hosts (and as
 * `ssh-keyscan` prints). The blob starts with its own type name, which must
 * agree with the line's. Throws a config error otherwise.
 */
export function parseHostKey(line: string): Buffer {
  const fields = line.trim().split(/\s+/);
  const typeIndex = fields.findIndex((field) => keyTypes.test(field));
  const type = fields[typeIndex];
  const encoded = fields[typeIndex + 1];
  if (typeIndex >= 0 && type && encoded && /^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) {
    const blob = Buffer.from(encoded, 'base64');
    const nameLength = blob.length >= 4 ? blob.readUInt32BE(0) : -1;
    if (nameLength > 0 && blob.subarray(4, 4 + nameLength).toString('latin1') === type) return blob;
  }
  throw new EngineError(
    'config',
    'ssh_config.host_key: expected a public key line such as "ssh-ed25519 AAAA…" (ssh-keyscan prints them)',
  );
}

export interface SshTunnelConfig {
  readonly host: string;
  readonly port: number;
  readonly user: string;
  readonly password?: string | undefined;
  readonly privateKey?: string | undefined;
  /** The server's public key (authorized_keys or known_hosts line); unset: any key is accepted. */
  readonly hostKey?: string | undefined;
}

export interface TunnelTarget {
  readonly host: string;
  readonly port: number;
}

const readyTimeoutMs = 15_000;

/**
 * One connection to the target through the SSH session, as the PostgreSQL
 * driver uses a socket: `connect()` opens the channel and emits 'connect';
 * bytes flow both ways with back-pressure; the end or close of either side
 * ends both. Socket options (no delay, keep-alive) are the SSH session's.
 */
class TunnelStream extends Duplex {
  readonly #ssh: SshClient;
  readonly #target: TunnelTarget;
  #channel: ClientChannel | undefined;

  constructor(ssh: SshClient, target: TunnelTarget) {
    super({ allowHalfOpen: false });
    this.#ssh = ssh;
    this.#target = target;
  }

  connect(): this {
    this.#ssh.forwardOut('127.0.0.1', 0, this.#target.host, this.#target.port, (error, channel) => {
      if (error) {
        this.destroy(error);
        return;
      }
      if (this.destroyed) {
        channel.close();
        return;
      }
      this.#channel = channel;
      channel.on('data', (chunk: Buffer) => {
        if (!this.push(chunk)) channel.pause();
      });
      channel.once('end', () => this.push(null));
      channel.once('close', () => this.destroy());
      channel.on('error', (failure: Error) => this.destroy(failure));
      this.emit('connect');
    });
    return this;
  }

  setNoDelay(): this {
    return this;
  }

  setKeepAlive(): this {
    return this;
  }

  override _read(): void {
    this.#channel?.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    // The driver writes once 'connect' was emitted, so the channel is there.
    if (!this.#channel) {
      callback(new Error('ssh tunnel: write before the channel opened'));
      return;
    }
    if (this.#channel.write(chunk)) callback();
    else this.#channel.once('drain', () => callback());
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.#channel?.end();
    callback();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#channel?.close();
    // 'close' a turn later, as a socket's comes: a TLS session over this stream
    // that destroys it on a failed handshake reports its error first, so the
    // driver tells a certificate refused from a connection lost.
    setImmediate(() => callback(error));
  }
}

export class SshTunnel {
  readonly #ssh: SshClient;
  readonly #target: TunnelTarget;
  readonly #streams = new Set<TunnelStream>();
  #closed = false;

  private constructor(ssh: SshClient, target: TunnelTarget) {
    this.#ssh = ssh;
    this.#target = target;
  }

  /** Connects to the SSH server; each `connection()` then reaches `target` through it. */
  static async open(config: SshTunnelConfig, target: TunnelTarget): Promise<SshTunnel> {
    if (!config.password && !config.privateKey) {
      throw new EngineError(
        'config',
        `ssh tunnel to ${config.host}:${config.port} has no password or private key`,
      );
    }
    const ssh = await connectSsh(config);
    const tunnel = new SshTunnel(ssh, target);
    // A dead SSH session ends every connection through it; owners reconnect.
    ssh.on('error', () => tunnel.close());
    ssh.on('close', () => tunnel.close());
    return tunnel;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** A new connection to the target, not yet opened: the driver calls its `connect()`. */
  connection(): Duplex {
    const stream = new TunnelStream(this.#ssh, this.#target);
    this.#streams.add(stream);
    stream.once('close', () => this.#streams.delete(stream));
    if (this.#closed) stream.destroy(new Error('ssh tunnel closed'));
    return stream;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const stream of this.#streams) stream.destroy();
    this.#ssh.end();
  }
}

async function connectSsh(config: SshTunnelConfig): Promise<SshClient> {
  // Loaded on first use: most deployments never tunnel, and ssh2 costs start-up time.
  const { Client } = await import('ssh2');
  const expectedKey = config.hostKey ? parseHostKey(config.hostKey) : undefined;
  let offeredKey: Buffer | undefined;
  const options: ConnectConfig = {
    host: config.host,
    port: config.port,
    username: config.user,
    readyTimeout: readyTimeoutMs,
    keepaliveInterval: 10_000,
    ...(config.password ? { password: config.password } : {}),
    ...(config.privateKey ? { privateKey: config.privateKey } : {}),
    ...(expectedKey
      ? {
          // Without hostHash, ssh2 hands over the raw key blob the server signed with.
          hostVerifier: (key: Buffer) => {
            offeredKey = key;
            return key.equals(expectedKey);
          },
        }
      : {}),
  };
  return new Promise((resolve, reject) => {
    const ssh = new Client();
    ssh.once('ready', () => resolve(ssh));
    ssh.once('error', (cause: Error) => {
      if (expectedKey && offeredKey && !offeredKey.equals(expectedKey)) {
        reject(
          new EngineError(
            'config',
            `ssh tunnel to ${config.host}:${config.port}: the server's host key is not ssh_config.host_key; it offered ${describeKey(offeredKey)}`,
            { cause },
          ),
        );
        return;
      }
      reject(classifySshError(cause, `ssh tunnel to ${config.user}@${config.host}:${config.port}`));
    });
    ssh.connect(options);
  });
}

/** A key as `type SHA256:fingerprint`, the way OpenSSH prints it. */
function describeKey(blob: Buffer): string {
  const nameLength = blob.length >= 4 ? blob.readUInt32BE(0) : 0;
  const type = blob.subarray(4, 4 + nameLength).toString('latin1');
  const fingerprint = createHash('sha256').update(blob).digest('base64').replace(/=+$/, '');
  return `${type} SHA256:${fingerprint}`;
}

const unverifiedPeers = new Set<string>();

/**
 * Warns, once per peer in a process, that the peer's SSH tunnel accepts any
 * host key: whoever can intercept the SSH connection can then read the
 * database traffic (and the password, unless TLS is verified inside).
 */
export function warnUnverifiedHostKey(
  peerName: string,
  ssh: { readonly hostKey?: string | undefined } | undefined,
  warn: (message: string) => void,
): void {
  if (!ssh || ssh.hostKey || unverifiedPeers.has(peerName)) return;
  unverifiedPeers.add(peerName);
  warn(
    `peer ${peerName}: the ssh tunnel does not verify the server's host key; set ssh_config.host_key (docs/security.md)`,
  );
}

// Local TCP forwarder over SSH. Drivers (pg, replication streams) want a host and
// port they can dial like any other; a loopback listener whose connections each
// become an SSH direct-tcpip channel gives every driver the tunnel unchanged.
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';
import type { ConnectConfig, Client as SshClient } from 'ssh2';
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

export class SshTunnel {
  readonly localHost = '127.0.0.1';
  readonly localPort: number;
  readonly #ssh: SshClient;
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  #closed = false;

  private constructor(ssh: SshClient, server: Server) {
    this.#ssh = ssh;
    this.#server = server;
    this.localPort = (server.address() as AddressInfo).port;
  }

  /** Connects to the SSH server and starts forwarding a loopback port to `target`. */
  static async open(config: SshTunnelConfig, target: TunnelTarget): Promise<SshTunnel> {
    if (!config.password && !config.privateKey) {
      throw new EngineError(
        'config',
        `ssh tunnel to ${config.host}:${config.port} has no password or private key`,
      );
    }
    const ssh = await connectSsh(config);
    const server = createServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const tunnel = new SshTunnel(ssh, server);
    server.on('connection', (socket) => tunnel.#forward(socket, target));
    // A dead SSH session makes every forwarded connection fail; close so owners reconnect.
    ssh.on('error', () => tunnel.close());
    ssh.on('close', () => tunnel.close());
    return tunnel;
  }

  get closed(): boolean {
    return this.#closed;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const socket of this.#sockets) socket.destroy();
    this.#server.close();
    this.#ssh.end();
  }

  #forward(socket: Socket, target: TunnelTarget): void {
    this.#sockets.add(socket);
    socket.once('close', () => this.#sockets.delete(socket));
    // Either end may go away mid-write (EPIPE, ECONNRESET): close both quietly;
    // the driver on the local end sees its connection end and reports it.
    socket.on('error', () => socket.destroy());
    socket.pause();
    this.#ssh.forwardOut('127.0.0.1', 0, target.host, target.port, (error, channel) => {
      if (error) {
        socket.destroy();
        return;
      }
      channel.on('error', () => socket.destroy());
      socket.pipe(channel).pipe(socket);
      channel.once('close', () => socket.destroy());
      socket.once('close', () => channel.close());
      socket.resume();
    });
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
    ssh.once('error', (cause: Error & { level?: string }) => {
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
      const what = cause.level === 'client-authentication' ? 'authentication failed' : 'could not connect';
      reject(
        new EngineError('ssh_tunnel', `ssh tunnel to ${config.user}@${config.host}:${config.port}: ${what}`, {
          cause,
        }),
      );
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

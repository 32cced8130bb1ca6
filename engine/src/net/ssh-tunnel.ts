// Local TCP forwarder over SSH. Drivers (pg, replication streams) want a host and
// port they can dial like any other; a loopback listener whose connections each
// become an SSH direct-tcpip channel gives every driver the tunnel unchanged.
import { once } from 'node:events';
import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';
import type { ConnectConfig, Client as SshClient } from 'ssh2';
import { classifySshError } from '../connectors/classify/index.ts';
import { EngineError } from '../errors.ts';

export interface SshTunnelConfig {
  readonly host: string;
  readonly port: number;
  readonly user: string;
  readonly password?: string | undefined;
  readonly privateKey?: string | undefined;
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
  const options: ConnectConfig = {
    host: config.host,
    port: config.port,
    username: config.user,
    readyTimeout: readyTimeoutMs,
    keepaliveInterval: 10_000,
    ...(config.password ? { password: config.password } : {}),
    ...(config.privateKey ? { privateKey: config.privateKey } : {}),
  };
  return new Promise((resolve, reject) => {
    const ssh = new Client();
    ssh.once('ready', () => resolve(ssh));
    ssh.once('error', (cause: Error) => {
      reject(classifySshError(cause, `ssh tunnel to ${config.user}@${config.host}:${config.port}`));
    });
    ssh.connect(options);
  });
}

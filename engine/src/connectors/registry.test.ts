// The destination drivers are loaded when a destination first talks to its
// server, not when the registry is imported or a destination is made: a process
// without Kafka or ClickHouse peers never holds their drivers (about 90 MiB
// of resident memory; docs/startup.md, Memory).
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const drivers = ['@platformatic/kafka', '@clickhouse/client', 'snowflake-sdk', 'kafkajs'];

// A fresh process: what this test's own process already loaded says nothing.
// Every module resolved, by import or require, is recorded by a resolve hook.
const script = `
  import { registerHooks } from 'node:module';
  import pino from 'pino';
  const resolved = new Set();
  registerHooks({
    resolve(specifier, context, next) {
      const result = next(specifier, context);
      resolved.add(result.url);
      return result;
    },
  });
  const drivers = ${JSON.stringify(drivers)};
  const loaded = () => drivers.filter((name) => [...resolved].some((url) => url.includes('/node_modules/' + name + '/')));
  const { createDestination } = await import(${JSON.stringify(join(import.meta.dirname, 'registry.ts'))});
  const { peerSchema } = await import(${JSON.stringify(join(import.meta.dirname, '..', 'resources', 'peer.ts'))});
  const { mirrorSpecSchema } = await import(${JSON.stringify(join(import.meta.dirname, '..', 'resources', 'mirror.ts'))});
  const table = { schema: 'public', table: 't' };
  const spec = mirrorSpecSchema.parse({
    name: 'lazy', sourcePeer: 'src', destinationPeer: 'dst', doInitialSnapshot: false,
    tableMappings: [{ source: table, destination: table }],
  });
  const logger = pino({ level: 'silent' });
  // Port 1 on loopback: nothing listens, so the first request fails at once.
  const peers = [
    { name: 'k', kind: 'stream', config: { servers: ['127.0.0.1:1'], disableTls: true } },
    { name: 'c', kind: 'analytics', config: { host: '127.0.0.1', port: 9000, httpPort: 1, user: 'u', password: '', database: 'd', disableTls: true } },
  ].map((peer) => peerSchema.parse(peer));
  const destinations = peers.map((peer) => createDestination(peer, { spec, logger }));
  const whenMade = loaded();
  for (const destination of destinations) await destination.check().catch(() => {});
  const afterCheck = loaded();
  for (const destination of destinations) await destination.close();
  console.log(JSON.stringify({ whenMade, afterCheck }));
`;

describe('destination drivers', () => {
  // A Node process loading the engine's modules: seconds on a busy machine.
  it('are loaded by the first request of a destination, not before', { timeout: 60_000 }, () => {
    const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(result.stderr).toBe('');
    const { whenMade, afterCheck } = JSON.parse(result.stdout) as Record<string, string[]>;
    expect(whenMade).toEqual([]);
    // Kafka's check reads metadata with the one Kafka client (an ES module); kafkajs is a test tool only.
    expect(afterCheck).toEqual(['@platformatic/kafka', '@clickhouse/client']);
  });
});

describe('resyncsOnline', () => {
  it('is true for exactly the kinds whose destination has shadow tables', async () => {
    const { createDestination, resyncsOnline } = await import('./registry.ts');
    const { peerSchema, peerKinds } = await import('../resources/peer.ts');
    const { mirrorSpecSchema } = await import('../resources/mirror.ts');
    const pino = (await import('pino')).default;
    const table = { schema: 'public', table: 't' };
    const spec = mirrorSpecSchema.parse({
      name: 'shadows',
      sourcePeer: 'src',
      destinationPeer: 'dst',
      doInitialSnapshot: false,
      tableMappings: [{ source: table, destination: table }],
    });
    const configs = {
      relational: { host: '127.0.0.1', port: 1, user: 'u', password: '', database: 'd' },
      analytics: { host: '127.0.0.1', port: 9000, httpPort: 1, user: 'u', password: '', database: 'd' },
      datawarehouse: {
        accountId: 'a-b',
        username: 'u',
        privateKey: 'k',
        database: 'd',
        warehouse: 'w',
        role: 'r',
      },
      stream: { servers: ['127.0.0.1:1'], disableTls: true },
    };
    for (const kind of peerKinds) {
      const peer = peerSchema.parse({ name: 'p', kind, config: configs[kind] });
      const destination = createDestination(peer, { spec, logger: pino({ level: 'silent' }) });
      expect({ kind, online: destination.shadowTables !== undefined }).toEqual({
        kind,
        online: resyncsOnline(kind),
      });
      await destination.close();
    }
  });
});

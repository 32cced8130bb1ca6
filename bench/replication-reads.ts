// How the walsender's CPU depends on how its reader reads, by hand: `node
// bench/replication-reads.ts` with the test PostgreSQL up. Not a test: it
// prints figures, asserts nothing.
//
// One table gets BENCH_ROWS inserts (transactions of 10,000) after a slot per
// run was made, so every run drains the same backlog of pgoutput messages
// (protocol 1), one reader after the other, readers alternating round by round:
//
//   recvlogical  pg_recvlogical writing to /dev/null
//   eager        the engine's way of reading (pg-copy-streams, one CopyData
//                message a chunk, read as soon as it is readable), each
//                message parsed and decoded, nothing else done with it
//   rest-N       the same, but after a read of less than 32 KiB (the socket
//                was drained) reading rests N ms before it goes on
//
// Reported per reader and round: rows/s (wall clock), the source server's CPU
// a row (its processes, bench/lib/server-cpu.ts: here, the walsender), and
// this process's CPU a row. BENCH_ROWS defaults to 1,000,000, BENCH_ROUNDS to
// 2; BENCH_READERS (comma-separated) picks the readers (default
// recvlogical,eager,rest-5).
import { execFile } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { both as copyBoth } from 'pg-copy-streams';
import { connectPostgres } from '../engine/src/connectors/postgres/driver/connect.ts';
import { decodePgoutput } from '../engine/src/connectors/postgres/source/pgoutput.ts';
import { parseReplicationMessage } from '../engine/src/connectors/postgres/source/replication-messages.ts';
import { createTestDatabase, type TestDatabase } from '../test/support/databases.ts';
import { postgres } from '../test/support/testenv.ts';
import { benchConfig } from './lib/config.ts';
import { ServerCpu } from './lib/server-cpu.ts';
import { insertRows, tableColumns } from './lib/workload.ts';

const { rows, rounds } = benchConfig;
const readers = (process.env.BENCH_READERS ?? 'recvlogical,eager,rest-5').split(',');
const drainedReadBytes = 32 * 1024;

/** Reads the slot until `rows` inserts have been decoded, resting `restMs` after a drained read. */
async function drainWithCopyBoth(database: TestDatabase, slot: string, restMs: number): Promise<void> {
  const connection = await connectPostgres(database.config, {
    replication: 'database',
    applicationName: slot,
  });
  const copy = connection.client.query(
    copyBoth(`START_REPLICATION SLOT ${slot} LOGICAL 0/0 (proto_version '1', publication_names 'reads')`, {
      alignOnCopyDataFrame: true,
      readableObjectMode: true,
      readableHighWaterMark: 1024,
    }),
  );
  // Destroying the stream at the end makes the connection report an error.
  copy.on('error', () => {});
  try {
    let inserts = 0;
    while (inserts < rows) {
      let bytesRead = 0;
      for (let chunk: Buffer | null = copy.read(); chunk !== null; chunk = copy.read()) {
        bytesRead += chunk.length;
        const message = parseReplicationMessage(chunk);
        if (message.tag === 'keepalive') continue;
        if (decodePgoutput(message.payload, message.dataStart, message.dataEnd).tag === 'insert') inserts++;
      }
      if (bytesRead === 0) {
        await new Promise((resolve) => copy.once('readable', resolve));
      } else if (bytesRead < drainedReadBytes && restMs > 0) {
        await sleep(restMs);
      }
    }
  } finally {
    copy.destroy();
    await connection.close().catch(() => {});
  }
}

async function drainWithRecvlogical(database: TestDatabase, slot: string, endLsn: string) {
  const { host, port, user, password, database: name } = database.config;
  await promisify(execFile)('pg_recvlogical', [
    '--dbname',
    `host=${host} port=${port} user=${user} password=${password} dbname=${name}`,
    '--slot',
    slot,
    '--start',
    '--option',
    'proto_version=1',
    '--option',
    'publication_names=reads',
    '--file',
    '/dev/null',
    '--endpos',
    endLsn,
    '--no-loop',
  ]);
}

const database = await createTestDatabase('bench_reads', postgres);
const slots: string[] = [];
try {
  const client = database.client;
  await client.query(`CREATE TABLE reads (${tableColumns})`);
  await client.query('CREATE PUBLICATION reads FOR TABLE reads');
  const runs = Array.from({ length: rounds }, (_, round) =>
    readers.map((_, index) => readers[(index + round) % readers.length] as string),
  ).flat();
  // Slots are per server: the database's name keeps them apart from other runs.
  for (const [index] of runs.entries()) {
    const slot = `${database.config.database}_${index}`;
    await client.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [slot]);
    slots.push(slot);
  }
  await insertRows(client, 'reads', rows);
  const endLsn = (await client.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0]
    ?.lsn as string;
  const serverCpu = await ServerCpu.of(client);
  for (const [index, reader] of runs.entries()) {
    const slot = slots[index] as string;
    const serverAtStart = serverCpu.seconds();
    const cpuAtStart = process.cpuUsage();
    const startedAt = performance.now();
    if (reader === 'recvlogical') await drainWithRecvlogical(database, slot, endLsn);
    else if (reader === 'eager') await drainWithCopyBoth(database, slot, 0);
    else if (reader.startsWith('rest-')) await drainWithCopyBoth(database, slot, Number(reader.slice(5)));
    else throw new Error(`unknown reader ${reader}`);
    const seconds = (performance.now() - startedAt) / 1000;
    const cpu = process.cpuUsage(cpuAtStart);
    // The walsender's last CPU ticks are read once it has exited and been reaped.
    await sleep(300);
    const serverNs = ((serverCpu.seconds() - serverAtStart) * 1e9) / rows;
    const readerNs = reader === 'recvlogical' ? 'n/a' : Math.round(((cpu.user + cpu.system) * 1000) / rows);
    console.log(
      `${reader.padEnd(12)} ${Math.round(rows / seconds)} rows/s, source server ${Math.round(serverNs)} ns a row, this process ${readerNs} ns a row`,
    );
  }
} finally {
  for (const slot of slots) {
    await database.client.query('SELECT pg_drop_replication_slot($1)', [slot]).catch(() => {});
  }
  await database.drop();
}

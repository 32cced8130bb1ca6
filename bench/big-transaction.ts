// What a restart inside a huge transaction costs on the source side, and what
// pgoutput's streaming of in-progress transactions (protocol 2, PostgreSQL 14+)
// changes about it. Not part of `make bench`: run it by hand,
//
//   BIG_TXN_ROWS=1000000,2000000 BIG_TXN_ROUNDS=3 node bench/big-transaction.ts
//
// For each size it writes one transaction of that many inserts into a fresh
// database on the test PostgreSQL (BIG_TXN_PG_PORT to pick another server of
// the test environment), then reads it from a slot that is never acknowledged,
// so every round re-decodes the same transaction as a restarted mirror does.
// Rounds alternate protocol 1 (the engine's: the server sends a transaction
// after decoding its commit) and protocol 2 with `streaming 'on'` (the server
// sends chunks of the transaction as logical_decoding_work_mem fills). Per
// round: seconds from START_REPLICATION to the first change, to the commit,
// the changes seen, and the slot's spill/stream counters. It also reports
// whether the LSNs of one transaction's changes ever repeat (they do for a
// COPY, whose rows share one WAL record). Results go to stdout as JSON lines
// and to bench/results/big-transaction-<date>-pg<major>.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { type Duplex, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { both as copyBoth, from as copyFrom } from 'pg-copy-streams';
import { connectPostgres } from '../engine/src/connectors/postgres/driver/connect.ts';
import { parseReplicationMessage } from '../engine/src/connectors/postgres/source/replication-messages.ts';
import { formatLsn } from '../engine/src/model/lsn.ts';
import { createTestDatabase, type TestDatabase, waitFor } from '../test/support/databases.ts';
import { otherPostgres, type PostgresServer, postgres, repoRoot } from '../test/support/testenv.ts';

const sizes = (process.env.BIG_TXN_ROWS ?? '1000000,2000000').split(',').map(Number);
const rounds = Number(process.env.BIG_TXN_ROUNDS ?? 3);
const server: PostgresServer =
  Object.values(otherPostgres).find((candidate) => String(candidate.port) === process.env.BIG_TXN_PG_PORT) ??
  postgres;

interface Round {
  readonly rows: number;
  readonly protocol: 'v1' | 'v2-streaming';
  readonly firstChangeSeconds: number;
  readonly commitSeconds: number;
  readonly changes: number;
  readonly repeatedLsns: number;
  readonly spillBytes: string | null;
  readonly streamBytes: string | null;
  readonly loadAverage: string;
}

/** Reads the slot until the transaction's commit (or stream commit) arrives. */
async function readOnce(
  database: TestDatabase,
  slot: string,
  startLsn: bigint,
  protocol: Round['protocol'],
): Promise<Omit<Round, 'rows' | 'protocol' | 'spillBytes' | 'streamBytes' | 'loadAverage'>> {
  const connection = await connectPostgres(database.config, {
    replication: 'database',
    applicationName: 'big-transaction-bench',
  });
  const options =
    protocol === 'v1'
      ? `proto_version '1', publication_names 'bench'`
      : `proto_version '2', streaming 'on', publication_names 'bench'`;
  const started = performance.now();
  const copy: Duplex = connection.client.query(
    copyBoth(`START_REPLICATION SLOT ${slot} LOGICAL ${formatLsn(startLsn)} (${options})`, {
      alignOnCopyDataFrame: true,
      readableObjectMode: true,
      readableHighWaterMark: 1024,
    }),
  );
  let firstChange: number | undefined;
  let changes = 0;
  let repeatedLsns = 0;
  let lastLsn = 0n;
  try {
    for await (const chunk of copy as AsyncIterable<Buffer>) {
      const message = parseReplicationMessage(chunk);
      if (message.tag !== 'xlogData') continue;
      const kind = String.fromCharCode(message.payload[message.dataStart] ?? 0);
      if (kind === 'I') {
        firstChange ??= performance.now();
        changes++;
        if (message.walStart === lastLsn) repeatedLsns++;
        if (message.walStart < lastLsn) throw new Error('a change arrived below the previous one');
        lastLsn = message.walStart;
      }
      // 'C': commit (protocol 1 and 2); 'c': stream commit of a streamed transaction.
      if (kind === 'C' || kind === 'c') {
        const commit = performance.now();
        return {
          firstChangeSeconds: ((firstChange ?? commit) - started) / 1000,
          commitSeconds: (commit - started) / 1000,
          changes,
          repeatedLsns,
        };
      }
    }
    throw new Error('the replication stream ended before the commit');
  } finally {
    copy.destroy();
    await connection.close().catch(() => {});
    // The walsender lets go of the slot a moment after the connection ends.
    await waitFor(async () => {
      const active = await database.client.query(
        `SELECT 1 FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`,
        [slot],
      );
      return active.rowCount === 0;
    }, 30_000);
  }
}

async function slotStats(database: TestDatabase, slot: string) {
  if (server.major < 14) return { spillBytes: null, streamBytes: null };
  const result = await database.client.query<{ spill: string; stream: string }>(
    `SELECT spill_bytes::text AS spill, stream_bytes::text AS stream FROM pg_stat_replication_slots WHERE slot_name = $1`,
    [slot],
  );
  return { spillBytes: result.rows[0]?.spill ?? null, streamBytes: result.rows[0]?.stream ?? null };
}

async function measure(rows: number): Promise<Round[]> {
  const database = await createTestDatabase('bigtxn_bench', server);
  const slot = `bigtxn_bench_${database.name.slice(-8)}`;
  const results: Round[] = [];
  try {
    const { client } = database;
    await client.query(
      `CREATE TABLE big (id bigint PRIMARY KEY, account int NOT NULL, amount numeric(12,2), note text)`,
    );
    await client.query(`CREATE PUBLICATION bench FOR TABLE big`);
    const created = await client.query<{ lsn: string }>(
      `SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')`,
      [slot],
    );
    const startLsn = parseLsnText(created.rows[0]?.lsn ?? '0/0');
    const written = performance.now();
    await client.query(
      `INSERT INTO big SELECT g, g % 1000, g * 0.01, 'note ' || md5(g::text) FROM generate_series(1, ${rows}) g`,
    );
    console.error(`${rows} rows written in ${((performance.now() - written) / 1000).toFixed(1)} s`);
    for (let round = 0; round < rounds; round++) {
      for (const protocol of ['v1', 'v2-streaming'] as const) {
        if (protocol === 'v2-streaming' && server.major < 14) continue;
        const before = await slotStats(database, slot);
        const read = await readOnce(database, slot, startLsn, protocol);
        const after = await slotStats(database, slot);
        const result: Round = {
          rows,
          protocol,
          ...read,
          spillBytes: delta(before.spillBytes, after.spillBytes),
          streamBytes: delta(before.streamBytes, after.streamBytes),
          loadAverage: loadavg()
            .map((value) => value.toFixed(2))
            .join(' '),
        };
        console.info(JSON.stringify(result));
        results.push(result);
      }
    }
    return results;
  } finally {
    await database.drop();
  }
}

/** How the LSNs of a COPY's rows relate: a multi-insert record carries many rows. */
async function copyLsns(): Promise<{ rows: number; repeatedLsns: number }> {
  const database = await createTestDatabase('bigtxn_copy', server);
  const slot = `bigtxn_copy_${database.name.slice(-8)}`;
  try {
    const { client } = database;
    await client.query(`CREATE TABLE big (id bigint PRIMARY KEY, note text)`);
    await client.query(`CREATE PUBLICATION bench FOR TABLE big`);
    const created = await client.query<{ lsn: string }>(
      `SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')`,
      [slot],
    );
    // COPY FROM writes its rows with multi-insert records: many rows, one LSN.
    const sink = client.query(copyFrom('COPY big (id, note) FROM STDIN'));
    const lines = Array.from({ length: 10_000 }, (_, index) => `${index + 1}\tn${index + 1}\n`).join('');
    await pipeline(Readable.from([lines]), sink);
    const read = await readOnce(database, slot, parseLsnText(created.rows[0]?.lsn ?? '0/0'), 'v1');
    return { rows: read.changes, repeatedLsns: read.repeatedLsns };
  } finally {
    await database.drop();
  }
}

function delta(before: string | null, after: string | null): string | null {
  if (before === null || after === null) return null;
  return (BigInt(after) - BigInt(before)).toString();
}

function parseLsnText(text: string): bigint {
  const [high = '0', low = '0'] = text.split('/');
  return (BigInt(`0x${high}`) << 32n) | BigInt(`0x${low}`);
}

const all: Round[] = [];
for (const rows of sizes) all.push(...(await measure(rows)));
const copy = await copyLsns();
console.info(JSON.stringify({ copy }));
const directory = join(repoRoot, 'bench', 'results');
mkdirSync(directory, { recursive: true });
writeFileSync(
  join(directory, `big-transaction-${new Date().toISOString().slice(0, 10)}-pg${server.major}.json`),
  `${JSON.stringify({ server: server.major, rounds: all, copy }, null, 2)}\n`,
);

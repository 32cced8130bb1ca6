// Checks a PostgreSQL source before a mirror starts. Every problem found is
// reported at once, each naming what to change, so a user fixes them in one go.
import type pg from 'pg';
import { EngineError } from '../../errors.ts';
import { formatTableName, type TableName } from '../../resources/mirror.ts';
import { readTableInfo, type SourceTableInfo } from './table-info.ts';

export const minimumServerVersionNum = 120_000;

export interface SourceValidationInput {
  readonly tables: readonly TableName[];
  /** A user-given publication that must exist and contain every table. */
  readonly publicationName?: string | undefined;
  /** A slot the mirror already owns does not need a free slot. */
  readonly existingSlotName?: string | undefined;
}

export interface ValidatedSource {
  readonly serverVersion: string;
  readonly tables: readonly SourceTableInfo[];
}

interface ServerFacts {
  server_version: string;
  server_version_num: number;
  wal_level: string;
  can_replicate: boolean;
  max_replication_slots: number;
  used_replication_slots: number;
  max_wal_senders: number;
  used_wal_senders: number;
  slot_exists: boolean;
}

export async function validateSource(
  client: pg.Client,
  input: SourceValidationInput,
): Promise<ValidatedSource> {
  const problems: string[] = [];
  const facts = await client.query<ServerFacts>(
    `SELECT current_setting('server_version') AS server_version,
            current_setting('server_version_num')::int AS server_version_num,
            current_setting('wal_level') AS wal_level,
            (SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user) AS can_replicate,
            current_setting('max_replication_slots')::int AS max_replication_slots,
            (SELECT count(*)::int FROM pg_replication_slots) AS used_replication_slots,
            current_setting('max_wal_senders')::int AS max_wal_senders,
            (SELECT count(*)::int FROM pg_stat_replication) AS used_wal_senders,
            EXISTS (SELECT FROM pg_replication_slots WHERE slot_name = $1) AS slot_exists`,
    [input.existingSlotName ?? ''],
  );
  const server = facts.rows[0];
  if (!server) throw new EngineError('internal', 'source: server facts query returned no row');

  if (server.server_version_num < minimumServerVersionNum) {
    problems.push(`PostgreSQL ${server.server_version} is too old: version 12 or later is required`);
  }
  if (server.wal_level !== 'logical') {
    problems.push(`wal_level is '${server.wal_level}': set wal_level = logical on the source and restart it`);
  }
  if (!server.can_replicate) {
    problems.push(`the peer user lacks the REPLICATION attribute: ALTER ROLE <user> WITH REPLICATION`);
  }
  if (!server.slot_exists && server.used_replication_slots >= server.max_replication_slots) {
    problems.push(
      `all ${server.max_replication_slots} replication slots are in use: raise max_replication_slots or drop unused slots`,
    );
  }
  if (server.used_wal_senders >= server.max_wal_senders) {
    problems.push(`all ${server.max_wal_senders} WAL senders are in use: raise max_wal_senders`);
  }

  const tables: SourceTableInfo[] = [];
  for (const name of input.tables) {
    const info = await readTableInfo(client, name);
    const shown = formatTableName(name);
    if (!info) {
      problems.push(`source table ${shown} does not exist`);
      continue;
    }
    tables.push(info);
    if (info.keyColumns.length === 0 && info.replicaIdentity !== 'full') {
      problems.push(
        `source table ${shown} has no primary key: add one, or ALTER TABLE ${shown} REPLICA IDENTITY FULL`,
      );
    }
    if (info.replicaIdentity === 'nothing') {
      problems.push(
        `source table ${shown} has REPLICA IDENTITY NOTHING: updates and deletes could not be replicated`,
      );
    }
    const privilege = await client.query<{ ok: boolean }>(
      `SELECT has_table_privilege($1::oid, 'SELECT') AS ok`,
      [info.oid],
    );
    if (!privilege.rows[0]?.ok)
      problems.push(`the peer user cannot SELECT from ${shown}: GRANT SELECT ON ${shown}`);
  }

  if (input.publicationName !== undefined) {
    await checkPublication(client, input.publicationName, tables, problems);
  }

  if (problems.length > 0) {
    throw new EngineError('source_setup', `source is not ready for replication: ${problems.join('; ')}`);
  }
  return { serverVersion: server.server_version, tables };
}

async function checkPublication(
  client: pg.Client,
  publicationName: string,
  tables: readonly SourceTableInfo[],
  problems: string[],
): Promise<void> {
  const publication = await client.query(`SELECT 1 FROM pg_publication WHERE pubname = $1`, [
    publicationName,
  ]);
  if (publication.rowCount === 0) {
    problems.push(`publication ${publicationName} does not exist: create it or leave publication_name empty`);
    return;
  }
  const published = await client.query<{ schemaname: string; tablename: string }>(
    `SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = $1`,
    [publicationName],
  );
  const names = new Set(published.rows.map((row) => `${row.schemaname}.${row.tablename}`));
  for (const table of tables) {
    const shown = formatTableName(table.name);
    if (!names.has(shown)) {
      problems.push(
        `publication ${publicationName} does not contain ${shown}: ALTER PUBLICATION ... ADD TABLE`,
      );
    }
  }
}

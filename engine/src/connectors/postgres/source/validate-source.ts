// Checks a PostgreSQL source before a mirror starts. Every problem found is
// reported at once, each naming what to change, so a user fixes them in one go.
import type pg from 'pg';
import { EngineError } from '../../../errors.ts';
import { formatTableName, type TableName } from '../../../resources/mirror.ts';
import type { MissingTables, SourceTableInfo, SourceValidationInput, ValidatedSource } from '../../source.ts';
import { quoteIdent, quoteTable } from '../driver/sql.ts';
import { checkRowFilter, serverFiltersPublications } from './row-filter.ts';
import { readTableInfo } from './table-info.ts';

/**
 * PostgreSQL 13: the oldest release still maintained when this was written
 * (12 reached its end of life in November 2024), and the first with
 * `pg_replication_slots.wal_status` and `max_slot_wal_keep_size`, by which a
 * lost slot is told apart (docs/postgres-versions.md).
 */
export const minimumServerVersionNum = 130_000;
/** Failover slots (the FAILOVER option of CREATE_REPLICATION_SLOT). */
export const failoverSlotServerVersionNum = 170_000;

export type { SourceValidationInput, ValidatedSource } from '../../source.ts';

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
  const found = await findSourceProblems(client, input, { capacity: true });
  if (!input.missingTablesAllowed) {
    found.problems.unshift(
      ...found.missing.map((name) => `source table ${formatTableName(name)} does not exist`),
    );
  }
  if (found.problems.length > 0) {
    throw new EngineError(
      'source_setup',
      `source is not ready for replication: ${found.problems.join('; ')}`,
    );
  }
  // Only slots or WAL senders in use: other readers free them, so this is retried.
  if (found.capacityProblems.length > 0) {
    throw new EngineError('busy', `source is busy: ${found.capacityProblems.join('; ')}`);
  }
  return {
    serverVersion: found.serverVersion,
    tables: found.tables,
    missing: input.missingTablesAllowed ? found.missing : [],
  };
}

/** Which of `tables` the source does not have, with the WAL position at the look (Source.missingTables). */
export async function findMissingTables(
  client: pg.Client,
  tables: readonly TableName[],
): Promise<MissingTables> {
  const result = await client.query<{ gone: boolean[]; wal_lsn: string }>(
    `SELECT array(SELECT to_regclass(quote_ident(t.schema) || '.' || quote_ident(t.name)) IS NULL
                  FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(schema, name, n) ORDER BY t.n) AS gone,
            (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END
              - '0/0'::pg_lsn)::text AS wal_lsn`,
    [tables.map((table) => table.schema), tables.map((table) => table.table)],
  );
  const row = result.rows[0];
  if (!row) throw new EngineError('internal', 'source: the table lookup returned no row');
  return { missing: tables.filter((_, index) => row.gone[index]), walLsn: BigInt(row.wal_lsn) };
}

/** The fix for a table with neither a primary key nor a replica identity index. */
export function keylessTableFix(shown: string): string {
  return `add a primary key to ${shown} (or ALTER TABLE ${shown} REPLICA IDENTITY USING INDEX on a unique index of NOT NULL columns)`;
}

export interface NewMirrorSourceInput {
  readonly tables: readonly TableName[];
  readonly publicationName?: string | undefined;
  /** The slot the new mirror will create: it must not exist yet, unless adopted. */
  readonly slotName: string;
  /** The default-named publication the mirror will create: it must not exist yet, unless adopted. */
  readonly defaultPublicationName?: string | undefined;
  readonly adoptExistingSlot: boolean;
  readonly failoverSlot?: boolean | undefined;
  /**
   * Whether the destination takes a table without a key when the source logs
   * whole old rows (REPLICA IDENTITY FULL): a stream of change events does, a
   * table that is upserted by key does not.
   */
  readonly keylessTablesAllowed: boolean;
  /** Row filters by source table (`schema.table`), each checked by the source. */
  readonly rowFilters?: ReadonlyMap<string, string> | undefined;
}

/**
 * What the source can tell about a mirror before it is created: everything
 * `validateSource` checks except what may change by itself (free slots and
 * WAL senders), plus keyless tables the destination cannot take and a slot
 * name already in use. Each problem names the table or setting and the fix.
 */
export async function checkNewMirrorSource(
  client: pg.Client,
  input: NewMirrorSourceInput,
): Promise<string[]> {
  const found = await findSourceProblems(client, input, { capacity: false });
  // Missing tables first, in one line, as the facade has always named them.
  const problems =
    found.missing.length > 0
      ? [`source table(s) ${found.missing.map(formatTableName).join(', ')} do not exist`, ...found.problems]
      : [...found.problems];
  if (!input.keylessTablesAllowed) {
    for (const table of found.tables) {
      if (table.keyColumns.length === 0 && table.replicaIdentity === 'full') {
        const shown = formatTableName(table.name);
        problems.push(
          `source table ${shown} has no primary key; REPLICA IDENTITY FULL is not enough for this destination, which writes rows by key: ${keylessTableFix(shown)}`,
        );
      }
    }
  }
  if (input.rowFilters && input.rowFilters.size > 0) {
    // The mirror's own publication on 15+ is made with the filters: the server checks them as one.
    const asPublication = input.publicationName === undefined && (await serverFiltersPublications(client));
    for (const table of found.tables) {
      const filter = input.rowFilters.get(formatTableName(table.name));
      if (filter === undefined) continue;
      const checked = await checkRowFilter(client, table, filter, asPublication);
      if (checked.problem) problems.push(checked.problem);
    }
  }
  const slot = await client.query(`SELECT 1 FROM pg_replication_slots WHERE slot_name = $1`, [
    input.slotName,
  ]);
  // The mirror never uses a slot or publication it did not create unless told to (docs/mirror-lifecycle.md).
  if ((slot.rowCount ?? 0) > 0 && !input.adoptExistingSlot) {
    problems.push(
      `replication slot ${input.slotName} already exists and a new mirror would not own it: choose another replication_slot_name, set adopt_existing_slot to let the mirror read and advance it (it is never dropped), or drop the slot if nothing uses it (SELECT pg_drop_replication_slot('${input.slotName}'))`,
    );
  }
  if (input.defaultPublicationName !== undefined && !input.adoptExistingSlot) {
    const publication = await client.query(`SELECT 1 FROM pg_publication WHERE pubname = $1`, [
      input.defaultPublicationName,
    ]);
    if ((publication.rowCount ?? 0) > 0) {
      problems.push(
        `publication ${input.defaultPublicationName} already exists and a new mirror would not own it: set publication_name to a publication of the mirror's tables, or set adopt_existing_slot`,
      );
    }
  }
  return problems;
}

async function findSourceProblems(
  client: pg.Client,
  input: SourceValidationInput,
  options: { readonly capacity: boolean },
): Promise<{
  serverVersion: string;
  tables: SourceTableInfo[];
  missing: TableName[];
  problems: string[];
  capacityProblems: string[];
}> {
  const problems: string[] = [];
  const capacityProblems: string[] = [];
  const facts = await client.query<ServerFacts>(
    `SELECT current_setting('server_version') AS server_version,
            current_setting('server_version_num')::int AS server_version_num,
            current_setting('wal_level') AS wal_level,
            (SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user)
              -- Amazon RDS grants replication through membership in rds_replication
              -- instead of the attribute (CASE: pg_has_role fails on a missing role).
              OR CASE WHEN EXISTS (SELECT FROM pg_roles WHERE rolname = 'rds_replication')
                      THEN pg_has_role('rds_replication', 'MEMBER') ELSE false END AS can_replicate,
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
    problems.push(`PostgreSQL ${server.server_version} is too old: version 13 or later is required`);
  } else if (input.failoverSlot && server.server_version_num < failoverSlotServerVersionNum) {
    problems.push(
      `failover slots need PostgreSQL 17 or later and the source runs ${server.server_version}: unset failover_slot (spec failoverSlot)`,
    );
  }
  if (server.wal_level !== 'logical') {
    problems.push(`wal_level is '${server.wal_level}': set wal_level = logical on the source and restart it`);
  }
  if (!server.can_replicate) {
    problems.push(
      `the peer user lacks the REPLICATION attribute: ALTER ROLE <user> WITH REPLICATION (on Amazon RDS: GRANT rds_replication TO <user>)`,
    );
  }
  // Slots and WAL senders in use may be freed by then: checked when the mirror starts, not at create.
  if (
    options.capacity &&
    !server.slot_exists &&
    server.used_replication_slots >= server.max_replication_slots
  ) {
    capacityProblems.push(
      `all ${server.max_replication_slots} replication slots are in use: raise max_replication_slots or drop unused slots`,
    );
  }
  if (options.capacity && server.used_wal_senders >= server.max_wal_senders) {
    capacityProblems.push(`all ${server.max_wal_senders} WAL senders are in use: raise max_wal_senders`);
  }

  const tables: SourceTableInfo[] = [];
  const missing: TableName[] = [];
  for (const name of input.tables) {
    const info = await readTableInfo(client, name);
    const shown = formatTableName(name);
    if (!info) {
      missing.push(name);
      continue;
    }
    tables.push(info);
    if (info.keyColumns.length === 0 && info.replicaIdentity !== 'full') {
      problems.push(
        `source table ${shown} has no primary key: ${keylessTableFix(shown)}; for a Kafka destination ALTER TABLE ${shown} REPLICA IDENTITY FULL is enough`,
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

  problems.push(...partitionOverlaps(tables));
  if (input.publicationName !== undefined) {
    await checkPublication(client, input.publicationName, tables, problems);
  }
  return { serverVersion: server.server_version, tables, missing, problems, capacityProblems };
}

/**
 * A partition mapped beside a partitioned table it belongs to: its rows would
 * be loaded twice and its changes arrive under one of the two names only.
 */
function partitionOverlaps(tables: readonly SourceTableInfo[]): string[] {
  const mapped = new Set(tables.map((table) => formatTableName(table.name)));
  const problems: string[] = [];
  for (const table of tables) {
    const ancestor = table.partitionOf.map(formatTableName).find((name) => mapped.has(name));
    if (ancestor !== undefined) {
      problems.push(
        `source table ${formatTableName(table.name)} is a partition of ${ancestor}, which the mirror maps too: its rows would be copied twice and its changes arrive under ${ancestor}'s name only; map one of the two`,
      );
    }
  }
  return problems;
}

/**
 * A user-named publication must publish every mapped table under the mapped
 * name: a partitioned table's changes via its root (else they arrive under
 * each partition's name), and a mapped partition not via a published parent
 * (else they arrive under the parent's).
 */
async function checkPublication(
  client: pg.Client,
  publicationName: string,
  tables: readonly SourceTableInfo[],
  problems: string[],
): Promise<void> {
  const publication = await client.query<{ pubviaroot: boolean }>(
    `SELECT pubviaroot FROM pg_publication WHERE pubname = $1`,
    [publicationName],
  );
  const viaRoot = publication.rows[0]?.pubviaroot;
  if (viaRoot === undefined) {
    problems.push(`publication ${publicationName} does not exist: create it or leave publication_name empty`);
    return;
  }
  // What the publication publishes, under the names its changes carry.
  const published = await client.query<{ schemaname: string; tablename: string }>(
    `SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = $1`,
    [publicationName],
  );
  const names = new Set(published.rows.map((row) => `${row.schemaname}.${row.tablename}`));
  const quoted = quoteIdent(publicationName);
  for (const table of tables) {
    const shown = formatTableName(table.name);
    if (table.partitioned && !viaRoot) {
      problems.push(
        `publication ${publicationName} publishes the changes of ${shown}'s partitions under their own names (publish_via_partition_root is off), so they would not reach ${shown}: ALTER PUBLICATION ${quoted} SET (publish_via_partition_root = true)`,
      );
      continue;
    }
    const publishedParent = viaRoot
      ? table.partitionOf.map(formatTableName).find((name) => names.has(name))
      : undefined;
    if (publishedParent !== undefined) {
      problems.push(
        `publication ${publicationName} publishes the changes of ${shown} under its parent ${publishedParent}'s name (publish_via_partition_root is on): map ${publishedParent} instead, or use a publication without ${publishedParent}`,
      );
      continue;
    }
    if (!names.has(shown)) {
      problems.push(
        `publication ${publicationName} does not contain ${shown}: ALTER PUBLICATION ${quoted} ADD TABLE ${quoteTable(table.name)}`,
      );
    }
  }
}

// The resource store of standalone mode: tables in the embedded PostgreSQL
// (PGlite) that also holds the catalog. Peer secrets live in their own table,
// never in the peer row. Change notifications stay in-process.
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import {
  joinPeerSecrets,
  type MirrorResource,
  type MirrorResourceSpec,
  migrate,
  mirrorResourceSpecSchema,
  type Peer,
  type PeerKind,
  type PeerListEntry,
  type PeerResource,
  ResourceConflictError,
  type ResourceEvent,
  ResourceExistsError,
  ResourceNotFoundError,
  type ResourceStore,
  type ScriptResource,
  type SqlExecutor,
  splitPeerSecrets,
} from '../../../engine/src/index.ts';
import type { PeerSecretFiles } from './peer-secret-files.ts';

/** Standalone mode has one process on its embedded database; the key only keeps the contract. */
const storeMigrationLockKey = '7261627574617280';

const migrations = [
  `CREATE SCHEMA IF NOT EXISTS resources`,
  `CREATE TABLE IF NOT EXISTS resources.peers (
     name text PRIMARY KEY, kind text NOT NULL, config jsonb NOT NULL, version text,
     created_at timestamptz NOT NULL DEFAULT now())`,
  `CREATE TABLE IF NOT EXISTS resources.peer_secrets (
     name text PRIMARY KEY REFERENCES resources.peers (name) ON DELETE CASCADE, secrets jsonb NOT NULL)`,
  `CREATE TABLE IF NOT EXISTS resources.mirrors (
     name text PRIMARY KEY, uid text NOT NULL, spec jsonb NOT NULL, generation integer NOT NULL DEFAULT 1,
     deleting boolean NOT NULL DEFAULT false, failed_generation integer,
     created_at timestamptz NOT NULL DEFAULT now())`,
  `CREATE TABLE IF NOT EXISTS resources.scripts (
     id serial PRIMARY KEY, name text NOT NULL UNIQUE, lang text NOT NULL, source text NOT NULL)`,
];

interface PeerRow {
  name: string;
  kind: PeerKind;
  config: Record<string, unknown>;
  version: string | null;
  created_at: Date;
  secrets: Record<string, string> | null;
}

interface MirrorRow {
  name: string;
  uid: string;
  spec: unknown;
  generation: number;
  deleting: boolean;
  failed_generation: number | null;
  created_at: Date;
}

interface ScriptRow {
  id: number;
  name: string;
  lang: 'lua';
  source: string;
}

/** Script ids are a `serial` column: an id outside its range names no script (and would make the query fail). */
function isScriptId(id: number): boolean {
  return Number.isInteger(id) && id >= 1 && id <= 2_147_483_647;
}

function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === '23505';
}

function toMirror(row: MirrorRow): MirrorResource {
  return {
    name: row.name,
    uid: row.uid,
    spec: mirrorResourceSpecSchema.parse(row.spec),
    generation: row.generation,
    deleting: row.deleting,
    failedGeneration: row.failed_generation,
    createdAt: row.created_at,
  };
}

function toPeer(row: PeerRow, withFileSecrets: (peer: Peer) => Peer): PeerResource {
  const stored = joinPeerSecrets({
    name: row.name,
    kind: row.kind,
    config: row.config,
    secrets: row.secrets ?? {},
  });
  return {
    peer: withFileSecrets(stored),
    version: row.version,
    createdAt: row.created_at,
  };
}

const peerSelect = `SELECT p.name, p.kind, p.config, p.version, p.created_at, s.secrets
  FROM resources.peers p LEFT JOIN resources.peer_secrets s ON s.name = p.name`;

export class EmbeddedStore implements ResourceStore {
  readonly #sql: SqlExecutor;
  readonly #events = new EventEmitter();
  readonly #withFileSecrets: (peer: Peer) => Peer;

  /** `secretFiles`: where secret fields may come from instead of the stored values (standalone/peer-secret-files.ts). */
  constructor(sql: SqlExecutor, secretFiles?: PeerSecretFiles) {
    this.#sql = sql;
    this.#withFileSecrets = secretFiles ? (peer) => secretFiles.apply(peer) : (peer) => peer;
  }

  async migrate(): Promise<void> {
    await migrate(this.#sql, { schema: 'resources', statements: migrations, lockKey: storeMigrationLockKey });
  }

  #emit(event: ResourceEvent): void {
    this.#events.emit('change', event);
  }

  watch(listener: (event: ResourceEvent) => void): () => void {
    this.#events.on('change', listener);
    return () => this.#events.off('change', listener);
  }

  async getPeer(name: string): Promise<PeerResource | undefined> {
    const { rows } = await this.#sql.query<PeerRow>(`${peerSelect} WHERE p.name = $1`, [name]);
    return rows[0] ? toPeer(rows[0], this.#withFileSecrets) : undefined;
  }

  async listPeers(): Promise<PeerResource[]> {
    const { rows } = await this.#sql.query<PeerRow>(`${peerSelect} ORDER BY p.name`);
    return rows.map((row) => toPeer(row, this.#withFileSecrets));
  }

  async listPeerEntries(): Promise<PeerListEntry[]> {
    // Secrets live in the same rows (or files, read when a peer is used): listing needs none of them.
    const { rows } = await this.#sql.query<{ name: string; kind: Peer['kind'] }>(
      `SELECT name, kind FROM resources.peers ORDER BY name`,
    );
    return rows.map(({ name, kind }) => ({ name, kind }));
  }

  async putPeer(peer: Peer, version: string | null): Promise<void> {
    const split = splitPeerSecrets(peer);
    await this.#sql.query(
      `INSERT INTO resources.peers (name, kind, config, version) VALUES ($1, $2, $3, $4)
       ON CONFLICT (name) DO UPDATE SET kind = EXCLUDED.kind, config = EXCLUDED.config, version = EXCLUDED.version`,
      [split.name, split.kind, JSON.stringify(split.config), version],
    );
    await this.#sql.query(
      `INSERT INTO resources.peer_secrets (name, secrets) VALUES ($1, $2)
       ON CONFLICT (name) DO UPDATE SET secrets = EXCLUDED.secrets`,
      [split.name, JSON.stringify(split.secrets)],
    );
    this.#emit({ kind: 'peer', name: peer.name });
  }

  async getMirror(name: string): Promise<MirrorResource | undefined> {
    const { rows } = await this.#sql.query<MirrorRow>(`SELECT * FROM resources.mirrors WHERE name = $1`, [
      name,
    ]);
    return rows[0] ? toMirror(rows[0]) : undefined;
  }

  async listMirrors(): Promise<MirrorResource[]> {
    const { rows } = await this.#sql.query<MirrorRow>(`SELECT * FROM resources.mirrors ORDER BY name`);
    return rows.map(toMirror);
  }

  async createMirror(spec: MirrorResourceSpec): Promise<MirrorResource> {
    const { rows } = await this.#sql.query<MirrorRow>(
      `INSERT INTO resources.mirrors (name, uid, spec) VALUES ($1, $2, $3)
       ON CONFLICT (name) DO NOTHING RETURNING *`,
      [spec.name, randomUUID().slice(0, 8), JSON.stringify(spec)],
    );
    if (!rows[0]) throw new ResourceExistsError('mirror', spec.name);
    this.#emit({ kind: 'mirror', name: spec.name });
    return toMirror(rows[0]);
  }

  async #updateMirror(name: string, set: string, params: unknown[]): Promise<MirrorResource> {
    const { rows } = await this.#sql.query<MirrorRow>(
      `UPDATE resources.mirrors SET ${set} WHERE name = $1 RETURNING *`,
      [name, ...params],
    );
    if (!rows[0]) throw new ResourceNotFoundError('mirror', name);
    this.#emit({ kind: 'mirror', name });
    return toMirror(rows[0]);
  }

  async updateMirrorSpec(
    name: string,
    spec: MirrorResourceSpec,
    expectedGeneration?: number,
  ): Promise<MirrorResource> {
    if (expectedGeneration === undefined) {
      return this.#updateMirror(name, `spec = $2, generation = generation + 1`, [JSON.stringify(spec)]);
    }
    // One statement: the check and the write cannot be separated by another writer.
    const { rows } = await this.#sql.query<MirrorRow>(
      `UPDATE resources.mirrors SET spec = $2, generation = generation + 1
       WHERE name = $1 AND generation = $3 RETURNING *`,
      [name, JSON.stringify(spec), expectedGeneration],
    );
    if (!rows[0]) {
      if (await this.getMirror(name)) throw new ResourceConflictError('mirror', name);
      throw new ResourceNotFoundError('mirror', name);
    }
    this.#emit({ kind: 'mirror', name });
    return toMirror(rows[0]);
  }

  requestMirrorRetry(name: string): Promise<MirrorResource> {
    return this.#updateMirror(name, `generation = generation + 1`, []);
  }

  async recordMirrorFailure(name: string, generation: number | null): Promise<void> {
    await this.#sql.query(`UPDATE resources.mirrors SET failed_generation = $2 WHERE name = $1`, [
      name,
      generation,
    ]);
  }

  markMirrorDeleting(name: string): Promise<MirrorResource> {
    return this.#updateMirror(name, `deleting = true`, []);
  }

  async removeMirror(name: string): Promise<void> {
    await this.#sql.query(`DELETE FROM resources.mirrors WHERE name = $1`, [name]);
    this.#emit({ kind: 'mirror', name });
  }

  async getScript(id: number): Promise<ScriptResource | undefined> {
    if (!isScriptId(id)) return undefined;
    const { rows } = await this.#sql.query<ScriptRow>(`SELECT * FROM resources.scripts WHERE id = $1`, [id]);
    return rows[0];
  }

  async getScriptByName(name: string): Promise<ScriptResource | undefined> {
    const { rows } = await this.#sql.query<ScriptRow>(`SELECT * FROM resources.scripts WHERE name = $1`, [
      name,
    ]);
    return rows[0];
  }

  async listScripts(): Promise<ScriptResource[]> {
    const { rows } = await this.#sql.query<ScriptRow>(`SELECT * FROM resources.scripts ORDER BY id`);
    return rows;
  }

  async createScript(script: Omit<ScriptResource, 'id'>): Promise<ScriptResource> {
    const { rows } = await this.#sql.query<ScriptRow>(
      `INSERT INTO resources.scripts (name, lang, source) VALUES ($1, $2, $3)
       ON CONFLICT (name) DO NOTHING RETURNING *`,
      [script.name, script.lang, script.source],
    );
    if (!rows[0]) throw new ResourceExistsError('script', script.name);
    return rows[0];
  }

  async updateScript(script: ScriptResource): Promise<ScriptResource> {
    if (!isScriptId(script.id)) throw new ResourceNotFoundError('script', String(script.id));
    let rows: ScriptRow[];
    try {
      ({ rows } = await this.#sql.query<ScriptRow>(
        `UPDATE resources.scripts SET name = $2, lang = $3, source = $4 WHERE id = $1 RETURNING *`,
        [script.id, script.name, script.lang, script.source],
      ));
    } catch (error) {
      // The new name belongs to another script.
      if (isUniqueViolation(error)) throw new ResourceExistsError('script', script.name);
      throw error;
    }
    if (!rows[0]) throw new ResourceNotFoundError('script', String(script.id));
    return rows[0];
  }
}

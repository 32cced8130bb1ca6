// Where resources live. Implementations: the embedded store of standalone mode
// and the Kubernetes API (custom resources and Secrets). Every method is atomic
// on its own; concurrent writers of one resource are serialised by the store.
import type { Peer } from '../resources/peer.ts';
import type { MirrorResource, MirrorResourceSpec, PeerResource, ScriptResource } from './resources.ts';

export class ResourceExistsError extends Error {
  constructor(kind: string, name: string) {
    super(`${kind} ${name} already exists`);
    this.name = 'ResourceExistsError';
  }
}

export class ResourceNotFoundError extends Error {
  constructor(kind: string, name: string) {
    super(`${kind} ${name} does not exist`);
    this.name = 'ResourceNotFoundError';
  }
}

/** A peer exists but its secrets cannot be read (in cluster mode: its Secret is missing). */
export class PeerSecretsUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PeerSecretsUnavailableError';
  }
}

/**
 * The resource changed after it was read (optimistic concurrency): read it
 * again, decide again, write again.
 */
export class ResourceConflictError extends Error {
  constructor(kind: string, name: string) {
    super(`${kind} ${name} was changed by another writer`);
    this.name = 'ResourceConflictError';
  }
}

/** The store cannot hold a resource of that name or shape (e.g. not a Kubernetes object name). */
export class ResourceInvalidError extends Error {
  constructor(kind: string, name: string, rule: string) {
    super(`${kind} ${name} cannot be stored: ${rule}`);
    this.name = 'ResourceInvalidError';
  }
}

export type ResourceEvent =
  | { readonly kind: 'mirror'; readonly name: string }
  | { readonly kind: 'peer'; readonly name: string }
  | { readonly kind: 'script'; readonly name: string };

/** A peer as a list shows it: one whose secrets cannot be read is listed with why, not left out. */
export interface PeerListEntry {
  readonly name: string;
  readonly kind: Peer['kind'];
  /** Cluster mode: why the peer's Secret cannot give its secrets (missing, not allowed, not bound, invalid). */
  readonly problem?: string | undefined;
}

export interface ResourceStore {
  getPeer(name: string): Promise<PeerResource | undefined>;
  listPeers(): Promise<PeerResource[]>;
  /** Every peer by name and kind, never failing for one peer's secrets (a broken one carries its problem). */
  listPeerEntries(): Promise<PeerListEntry[]>;
  /** Creates or replaces the peer (its secrets stored apart). */
  putPeer(peer: Peer, version: string | null): Promise<void>;

  getMirror(name: string): Promise<MirrorResource | undefined>;
  listMirrors(): Promise<MirrorResource[]>;
  /** Throws ResourceExistsError when a mirror of that name exists (dropping ones included). */
  createMirror(spec: MirrorResourceSpec): Promise<MirrorResource>;
  /**
   * Replaces the spec and bumps the generation. Throws ResourceNotFoundError;
   * with `expectedGeneration` (the generation the caller read the spec at),
   * throws ResourceConflictError when the mirror has moved on since.
   */
  updateMirrorSpec(
    name: string,
    spec: MirrorResourceSpec,
    expectedGeneration?: number,
  ): Promise<MirrorResource>;
  /**
   * Asks for a retry of a failed mirror with its spec unchanged: afterwards its
   * current generation is no longer marked failed (the embedded store bumps the
   * generation; a Kubernetes generation only moves with the spec, so the
   * cluster store clears the mark instead).
   */
  requestMirrorRetry(name: string): Promise<MirrorResource>;
  recordMirrorFailure(name: string, generation: number | null): Promise<void>;
  markMirrorDeleting(name: string): Promise<MirrorResource>;
  /** Forgets the mirror; called once teardown is done. */
  removeMirror(name: string): Promise<void>;

  getScript(id: number): Promise<ScriptResource | undefined>;
  getScriptByName(name: string): Promise<ScriptResource | undefined>;
  listScripts(): Promise<ScriptResource[]>;
  createScript(script: Omit<ScriptResource, 'id'>): Promise<ScriptResource>;
  /** Throws ResourceNotFoundError for an unknown id. */
  updateScript(script: ScriptResource): Promise<ScriptResource>;

  /** Calls `listener` after every change; returns a function that stops it. */
  watch(listener: (event: ResourceEvent) => void): () => void;
}

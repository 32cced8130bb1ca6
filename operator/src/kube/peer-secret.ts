// How a Peer's secrets come out of the Kubernetes Secret its `secretRef` names.
// Creating a Peer must not be a way to read Secrets: a Peer pointing at another
// application's Secret would send that password to a host of its author's
// choosing, and a Peer pointing at another peer's Secret would borrow that
// peer's password. So a Secret is read only when it carries the peer-secret
// label and names the Peer in its peers annotation (both set by whoever may
// write Secrets, never by the Peer's author), and only the secret fields of the
// peer's kind are taken from it, never a field of the spec.
import type { V1Secret } from '@kubernetes/client-node';
import type { ZodError } from 'zod';
import {
  isPeerSecretPath,
  type PeerKind,
  PeerSecretsUnavailableError,
  peerSecretPaths,
} from '../../../engine/src/index.ts';
import { managedByLabel } from './namespace-objects.ts';

/** The label (value "true") a Secret needs before a Peer may read it. */
export const peerSecretLabel = 'tributary.dev/peer-secret';

/**
 * The annotation naming the Peer objects (by `metadata.name`, comma-separated)
 * that may read a Secret. The label says a Secret is meant for peers at all;
 * this says for which, so a Peer's author cannot borrow another peer's password.
 */
export const peerSecretPeersAnnotation = 'tributary.dev/peers';

/**
 * The Secret the facade keeps a Peer object's secrets in. One the facade wrote
 * before it annotated its Secrets is bound to its Peer by this name (with the
 * managed-by label, which a Peer's author cannot set either).
 */
export function ownPeerSecretName(objectName: string): string {
  return `tributary-peer-${objectName}`;
}

/** Which Peer reads a Secret: its API name (for messages) and its object name (for the binding). */
export interface SecretReader {
  readonly name: string;
  readonly objectName: string;
}

/** A Peer's reference to its Secret: `keys` maps a secret field to the Secret's key holding it. */
export interface PeerSecretRef {
  readonly name: string;
  readonly keys?: Readonly<Record<string, string>>;
}

export type PeerSecretProblem = 'SecretNotFound' | 'SecretNotAllowed' | 'SecretNotBound' | 'SecretInvalid';

/** Why a Peer's secrets cannot be read; `reason` is the Peer's Ready condition reason. */
export class PeerSecretError extends PeerSecretsUnavailableError {
  readonly reason: PeerSecretProblem;
  readonly peer: string;
  readonly secret: string;

  constructor(reason: PeerSecretProblem, peer: string, secret: string, message: string) {
    super(`peer ${peer}: ${message}`);
    this.name = 'PeerSecretError';
    this.reason = reason;
    this.peer = peer;
    this.secret = secret;
  }
}

export function peerSecretMissing(peer: string, secret: string, namespace: string): PeerSecretError {
  return new PeerSecretError(
    'SecretNotFound',
    peer,
    secret,
    `Secret ${secret} not found in namespace ${namespace}; create it with the peer's secret fields as keys, the label ${peerSecretLabel}: "true" and the annotation ${peerSecretPeersAnnotation} naming the Peer`,
  );
}

/** Whether `secret` is bound to the Peer object `objectName`: named in the annotation, or the facade's own. */
export function isBoundTo(secret: V1Secret, objectName: string): boolean {
  const { annotations, labels, name } = secret.metadata ?? {};
  const peers = annotations?.[peerSecretPeersAnnotation]?.split(',').map((entry) => entry.trim()) ?? [];
  if (peers.includes(objectName)) return true;
  const managed = Object.entries(managedByLabel).every(([key, value]) => labels?.[key] === value);
  return managed && name === ownPeerSecretName(objectName);
}

/**
 * The peer's secret fields (dotted paths, as `joinPeerSecrets` takes them) read
 * from `secret`. Throws a PeerSecretError when the Secret lacks the label, is not
 * bound to the Peer, or the mapping names a field that is not a secret field of
 * `kind` or a key the Secret does not have. Messages name fields and keys, never values.
 */
export function peerSecretsFromSecret(
  reader: SecretReader,
  kind: PeerKind,
  ref: PeerSecretRef,
  secret: V1Secret,
): Record<string, string> {
  const peer = reader.name;
  if (secret.metadata?.labels?.[peerSecretLabel] !== 'true') {
    throw new PeerSecretError(
      'SecretNotAllowed',
      peer,
      ref.name,
      `Secret ${ref.name} lacks the label ${peerSecretLabel}: "true" that lets peers read it; add it (kubectl label secret ${ref.name} ${peerSecretLabel}=true) if this Secret is meant for peers`,
    );
  }
  if (!isBoundTo(secret, reader.objectName)) {
    // The other Peers it is bound to are not named: they are not this Peer author's to know.
    throw new PeerSecretError(
      'SecretNotBound',
      peer,
      ref.name,
      `Secret ${ref.name} is not bound to Peer ${reader.objectName}: its annotation ${peerSecretPeersAnnotation} does not name it; if this Peer may use the Secret, whoever manages Secrets adds it (kubectl annotate secret ${ref.name} --overwrite ${peerSecretPeersAnnotation}=<the Peers it names>,${reader.objectName})`,
    );
  }
  const mapping = ref.keys ?? {};
  for (const field of Object.keys(mapping)) {
    if (!isPeerSecretPath(kind, field)) {
      throw new PeerSecretError(
        'SecretInvalid',
        peer,
        ref.name,
        `secretRef.keys names ${field}, which is not a secret field of a ${kind} peer (those are ${peerSecretPaths[kind].join(', ')})`,
      );
    }
  }
  const data = secret.data ?? {};
  const secrets: Record<string, string> = {};
  for (const field of peerSecretPaths[kind]) {
    const key = mapping[field] ?? field;
    const encoded = data[key];
    if (encoded === undefined) {
      if (mapping[field] !== undefined) {
        throw new PeerSecretError(
          'SecretInvalid',
          peer,
          ref.name,
          `Secret ${ref.name} has no key ${key} (secretRef.keys maps ${field} to it)`,
        );
      }
      continue;
    }
    secrets[field] = Buffer.from(encoded, 'base64').toString('utf8');
  }
  return secrets;
}

/**
 * Why a Peer and its Secret do not make a peer, naming fields only (an issue's
 * message never holds a value). Unknown fields get their own words: they come
 * from a Peer written under newer CRDs than this version knows (an upgrade in
 * progress), not from a Secret.
 */
export function invalidPeerMessage(kind: string, secretName: string, error: ZodError): string {
  const unknown = error.issues.flatMap((issue) => (issue.code === 'unrecognized_keys' ? issue.keys : []));
  const invalid = [
    ...new Set(
      error.issues.filter((issue) => issue.code !== 'unrecognized_keys').map((issue) => issue.path.join('.')),
    ),
  ];
  const problems = [
    ...(invalid.length > 0
      ? [`${invalid.join(', ')} missing or invalid; a required secret field may be missing from the Secret`]
      : []),
    ...(unknown.length > 0
      ? [`unknown field(s) ${unknown.join(', ')}: written by a newer version of Tributary than this one?`]
      : []),
  ];
  return `the spec with Secret ${secretName} is not a valid ${kind} peer: ${problems.join('; ')}`;
}

// How a Peer's secrets come out of the Kubernetes Secret its `secretRef` names.
// Creating a Peer must not be a way to read Secrets: a Peer pointing at another
// application's Secret would send that password to a host of its author's
// choosing. So a Secret is read only when it carries the peer-secret label (set
// by whoever may write Secrets, never by the Peer's author), and only the secret
// fields of the peer's kind are taken from it, never a field of the spec.
import type { V1Secret } from '@kubernetes/client-node';
import type { ZodError } from 'zod';
import {
  isPeerSecretPath,
  type PeerKind,
  PeerSecretsUnavailableError,
  peerSecretPaths,
} from '../../../engine/src/index.ts';

/** The label (value "true") a Secret needs before a Peer may read it. */
export const peerSecretLabel = 'tributary.dev/peer-secret';

/** A Peer's reference to its Secret: `keys` maps a secret field to the Secret's key holding it. */
export interface PeerSecretRef {
  readonly name: string;
  readonly keys?: Readonly<Record<string, string>>;
}

export type PeerSecretProblem = 'SecretNotFound' | 'SecretNotAllowed' | 'SecretInvalid';

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
    `Secret ${secret} not found in namespace ${namespace}; create it with the peer's secret fields as keys and the label ${peerSecretLabel}: "true"`,
  );
}

/**
 * The peer's secret fields (dotted paths, as `joinPeerSecrets` takes them) read
 * from `secret`. Throws a PeerSecretError when the Secret lacks the label, or the
 * mapping names a field that is not a secret field of `kind` or a key the Secret
 * does not have. Messages name fields and keys, never values.
 */
export function peerSecretsFromSecret(
  peer: string,
  kind: PeerKind,
  ref: PeerSecretRef,
  secret: V1Secret,
): Record<string, string> {
  if (secret.metadata?.labels?.[peerSecretLabel] !== 'true') {
    throw new PeerSecretError(
      'SecretNotAllowed',
      peer,
      ref.name,
      `Secret ${ref.name} lacks the label ${peerSecretLabel}: "true" that lets peers read it; add it (kubectl label secret ${ref.name} ${peerSecretLabel}=true) if this Secret is meant for peers`,
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

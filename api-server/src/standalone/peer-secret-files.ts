// Peer secrets from files, in standalone mode: `<directory>/<peer>/<field>`
// (field as a dotted path: `password`, `sshConfig.privateKey`), so a password can
// live in a Docker or Kubernetes secret mount, or a systemd credential, instead
// of being sent through the API. A file's content replaces the field's stored
// value each time the peer is read, so rewriting the file rotates the secret at
// the next check or engine start. Only the directory the operator of the
// process names is read, and only the kind's secret fields: an API caller
// cannot point a peer at an arbitrary file.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { joinPeerSecrets, type Peer, peerSecretPaths, splitPeerSecrets } from '../../../engine/src/index.ts';

/** A file's content without the one line end an editor or `echo` adds. */
function withoutFinalNewline(text: string): string {
  return text.replace(/\r?\n$/, '');
}

export class PeerSecretFiles {
  readonly #directory: string;

  constructor(directory: string) {
    this.#directory = directory;
  }

  /** The peer with every secret field that has a file replaced by the file's content. */
  apply(peer: Peer): Peer {
    const fromFiles: Record<string, string> = {};
    for (const path of peerSecretPaths[peer.kind]) {
      // Peer names are resource names (no `/`, no `..`), so the file stays inside the directory.
      const file = join(this.#directory, peer.name, path);
      try {
        fromFiles[path] = withoutFinalNewline(readFileSync(file, 'utf8'));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      }
    }
    if (Object.keys(fromFiles).length === 0) return peer;
    const split = splitPeerSecrets(peer);
    return joinPeerSecrets({ ...split, secrets: { ...split.secrets, ...fromFiles } });
  }
}

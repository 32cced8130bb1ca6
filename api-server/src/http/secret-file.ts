// Files that hold a secret the service reads at start (the API password, the
// credentials file): refused when others may read or change them, naming the
// fix, before anything listens.
import { readFileSync, statSync } from 'node:fs';

/**
 * The file's text. `groupMayRead`: a Kubernetes Secret volume gives the pod's
 * fsGroup read (mode 0440); on a host of its own the file should be 0600.
 * Throws an Error naming the file and the fix, never its content.
 */
export function readSecretFile(path: string, what: string, groupMayRead: boolean): string {
  let mode: number;
  let text: string;
  try {
    mode = statSync(path).mode & 0o777;
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new Error(`cannot read the ${what} ${path}: ${(error as Error).message}`);
  }
  const forbidden = groupMayRead ? 0o037 : 0o077;
  if ((mode & forbidden) !== 0) {
    const fix = groupMayRead
      ? "mount it with mode 0440 or 0600 (a Secret volume's defaultMode)"
      : `make it 0600 (chmod 600 ${path})`;
    throw new Error(
      `the ${what} ${path} has mode 0${mode.toString(8)}, which lets others read or change it: ${fix}`,
    );
  }
  return text;
}

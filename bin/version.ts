// What `tributary --version` prints: the package version and, when known, the
// commit it was built from. The image sets TRIBUTARY_COMMIT at build time (it has
// no .git); a checkout asks git. Neither is required: the version alone is fine.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface BuildVersion {
  readonly version: string;
  readonly commit?: string;
}

const repoRoot = join(import.meta.dirname, '..');

function commitFromGit(): string | undefined {
  // Only this repository's own .git: an installed copy inside another checkout
  // must not report that checkout's commit.
  if (!existsSync(join(repoRoot, '.git'))) return undefined;
  try {
    const commit = execFileSync('git', ['-C', repoRoot, 'rev-parse', '--short=12', 'HEAD'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 2_000,
    }).trim();
    return /^[0-9a-f]{7,40}$/.test(commit) ? commit : undefined;
  } catch {
    // No git on this machine, or not a repository after all.
    return undefined;
  }
}

export function buildVersion(env: NodeJS.ProcessEnv = process.env): BuildVersion {
  const { version } = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string };
  const commit = env.TRIBUTARY_COMMIT?.trim() || commitFromGit();
  return commit ? { version, commit } : { version };
}

export function formatVersion({ version, commit }: BuildVersion): string {
  return commit ? `tributary ${version} (commit ${commit})` : `tributary ${version}`;
}

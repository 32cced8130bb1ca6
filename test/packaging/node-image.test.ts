// The test node runs the image scripts/testenv/image.sh builds without Docker;
// users run the Dockerfile's. This test reads the built OCI tarball and holds
// the two to the same entry point, user, working directory, environment and
// file set under /app, so what the cluster suite proves holds for the image
// users build.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { Copy, DockerfileParser } from 'dockerfile-ast';
import { beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, testenvDir } from '../support/testenv.ts';

const dockerfile = DockerfileParser.parse(readFileSync(join(repoRoot, 'Dockerfile'), 'utf8'));
/** The instructions of the last stage: what the image users run is made of. */
const runtimeStage = (() => {
  const instructions = dockerfile.getInstructions();
  const lastFrom = instructions.map((instruction) => instruction.getKeyword()).lastIndexOf('FROM');
  return instructions.slice(lastFrom);
})();
const argumentsOf = (keyword: string) =>
  runtimeStage
    .filter((instruction) => instruction.getKeyword() === keyword)
    .map((instruction) => instruction.getArguments().map((argument) => argument.getValue()));
const jsonForm = (keyword: string): unknown => JSON.parse(argumentsOf(keyword).at(-1)?.join(' ') ?? 'null');
/** The runtime stage's `ARG` defaults: what `docker build` without `--build-arg` puts into its `ENV`s. */
const argDefaults = new Map(
  argumentsOf('ARG').map(([declaration = '']) => {
    const [name = '', value = ''] = declaration.split('=', 2);
    return [name, value.replace(/^"(.*)"$/, '$1')] as const;
  }),
);
/** An `ENV` assignment as the built image holds it, its `$ARG` references replaced by their defaults. */
const resolvedEnv = (assignment: string) =>
  assignment.replace(/\$\{?(\w+)\}?/g, (_reference, name: string) => argDefaults.get(name) ?? '');

interface ImageConfig {
  Env: string[];
  WorkingDir: string;
  User: string;
  Entrypoint: string[];
  Cmd: string[];
}

const tarball = () => readFileSync(join(testenvDir, 'node', 'images', 'tributary.tarball'), 'utf8').trim();
const readEntry = (archive: string, entry: string) =>
  execFileSync('tar', ['-xOf', archive, entry], { maxBuffer: 1 << 30 });
const blob = (archive: string, digest: string) =>
  readEntry(archive, `blobs/sha256/${digest.replace('sha256:', '')}`);

/** Files of the checkout below `path` (a file or a folder), as the image holds them under /app. */
function checkoutFiles(path: string): string[] {
  const absolute = join(repoRoot, path);
  if (!statSync(absolute).isDirectory()) return [path];
  return readdirSync(absolute, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(repoRoot, join(entry.parentPath, entry.name)));
}

describe('the test node image and the Dockerfile', () => {
  let config: ImageConfig;
  let appFiles: string[];
  let layerEntries: string[][];

  beforeAll(() => {
    const archive = tarball();
    const index = JSON.parse(readEntry(archive, 'index.json').toString()) as {
      manifests: { digest: string }[];
    };
    const manifest = JSON.parse(blob(archive, index.manifests[0]?.digest ?? '').toString()) as {
      config: { digest: string };
      layers: { digest: string }[];
    };
    config = (JSON.parse(blob(archive, manifest.config.digest).toString()) as { config: ImageConfig }).config;
    layerEntries = manifest.layers.map((layer) =>
      execFileSync('tar', ['-t'], { input: blob(archive, layer.digest), maxBuffer: 1 << 28 })
        .toString()
        .split('\n')
        .filter(Boolean)
        .map((entry) => entry.replace(/^\.\//, '')),
    );
    appFiles = (layerEntries.at(-1) ?? []).filter(
      (entry) => entry.startsWith('app/') && !entry.endsWith('/'),
    );
  });

  it('has the same entry point, command, user and working directory', () => {
    expect(config.Entrypoint).toEqual(jsonForm('ENTRYPOINT'));
    expect(config.Cmd).toEqual(jsonForm('CMD'));
    expect(config.User).toBe(argumentsOf('USER').at(-1)?.[0]);
    expect(config.WorkingDir).toBe(argumentsOf('WORKDIR').at(-1)?.[0]);
    for (const [assignment = ''] of argumentsOf('ENV')) expect(config.Env).toContain(resolvedEnv(assignment));
  });

  it('holds under /app exactly what the runtime stage copies', () => {
    const copies = runtimeStage
      .filter((instruction): instruction is Copy => instruction instanceof Copy)
      .map((copy) => ({
        fromStage: copy.getFromFlag() !== null,
        paths: copy.getArguments().map((argument) => argument.getValue()),
      }));
    expect(copies.filter((copy) => copy.fromStage).map((copy) => copy.paths.at(-1))).toEqual([
      './node_modules',
    ]);
    const expected = copies
      .filter((copy) => !copy.fromStage)
      .flatMap((copy) => copy.paths.slice(0, -1).flatMap(checkoutFiles))
      .map((path) => `app/${path}`)
      .sort();
    const fromSources = appFiles.filter((entry) => !entry.startsWith('app/node_modules/')).sort();
    expect(fromSources).toEqual(expected);
    // The deps stage's `npm install --omit=dev`: the lock's production packages, no dev-only one.
    const lock = JSON.parse(readFileSync(join(repoRoot, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { dev?: boolean; optional?: boolean; devOptional?: boolean }>;
    };
    const installed = new Set(appFiles.map((entry) => entry.replace(/\/package\.json$/, '')));
    for (const [path, entry] of Object.entries(lock.packages)) {
      if (!path.startsWith('node_modules/')) continue;
      if (entry.dev) expect(installed, `${path} is dev-only`).not.toContain(`app/${path}`);
      else if (!entry.optional && !entry.devOptional)
        expect(installed, `${path} is needed`).toContain(`app/${path}`);
    }
  });

  it('runs Node 24 as the node user of node:24-slim (uid 1000)', () => {
    expect(argumentsOf('FROM').at(-1)?.[0]).toBe('node:24-slim');
    expect(layerEntries.flat()).toContain('usr/local/bin/node');
    const archive = tarball();
    const index = JSON.parse(readEntry(archive, 'index.json').toString()) as {
      manifests: { digest: string }[];
    };
    const manifest = JSON.parse(blob(archive, index.manifests[0]?.digest ?? '').toString()) as {
      layers: { digest: string }[];
    };
    const passwd = execFileSync('tar', ['-xO', './etc/passwd'], {
      input: blob(archive, manifest.layers[0]?.digest ?? ''),
      maxBuffer: 1 << 28,
    }).toString();
    expect(passwd).toMatch(/^node:x:1000:1000:/m);
    const nodeLayer =
      manifest.layers[layerEntries.findIndex((entries) => entries.includes('usr/local/bin/node'))];
    const directory = mkdtempSync(join(tmpdir(), 'node-image-'));
    try {
      execFileSync('tar', ['-x', '-C', directory, './usr/local/bin/node'], {
        input: blob(archive, nodeLayer?.digest ?? ''),
        maxBuffer: 1 << 30,
      });
      const version = execFileSync(join(directory, 'usr', 'local', 'bin', 'node'), ['--version'], {
        encoding: 'utf8',
      }).trim();
      expect(version).toMatch(/^v24\./);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });
});

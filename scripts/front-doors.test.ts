// Each package has a front door (docs/architecture.md, "Packages and their
// front doors"): `engine/src/index.ts`, `operator/src/index.ts` and
// `api-server/src/index.ts` export what others may use, and an import from
// outside a package goes through that file. What is not exported there is the
// package's own: its folders can be moved or split (the PostgreSQL connector's,
// the Kafka destination's, the change applier's) and only the front door
// changes. This test scans every import and fails on one that goes around a door.
//
// The rule, by where the importing file is:
// - a package (`<package>/src/`, its unit tests included) imports another only
//   through its door, and only downwards: engine imports neither of the others,
//   the operator imports the engine, the api-server the engine and the operator
//   (its cluster mode's store). It never imports its own door (its modules
//   import each other directly; the door would be a cycle), nor `test/` or
//   `bench/` outside a unit test's helpers (`test/support/`).
// - the engine's control plane (`engine/src/control/`) is a layer on top of the
//   rest of the engine, used by the operator and the api-server: no other engine
//   folder imports it (the front door re-exports it), so it stays one folder
//   that could move out whole.
// - `bin/` and `scripts/` go through the doors. bin/tributary.ts starts each
//   role's `main` by path (a process's entry, not an import), and before it
//   knows the role it reads the log formats from the logger itself (below).
// - tests and benchmarks outside the packages may import the internals of the
//   package they test, and nothing else: test/api the api-server's, test/kube
//   the operator's, test/integration, test/e2e and test/smoke the engine's
//   (connectors and pipeline against real servers), bench/ the engine's (it
//   measures its paths); test/support/ holds helpers of all of them and may
//   import any package's internals. Every other folder of test/ goes through
//   the doors.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const packages = ['engine', 'operator', 'api-server'] as const;
type Package = (typeof packages)[number];

/** Which packages each package may import (through their doors). */
const layers = {
  engine: [],
  operator: ['engine'],
  'api-server': ['engine', 'operator'],
} as const satisfies Record<Package, readonly Package[]>;

/** Folders outside the packages that test a package's internals, and which package's. */
const internalsTestedBy: ReadonlyArray<readonly [folder: string, internals: readonly Package[]]> = [
  ['test/support', packages],
  ['test/api', ['api-server']],
  ['test/kube', ['operator']],
  ['test/integration', ['engine']],
  ['test/e2e', ['engine']],
  ['test/smoke', ['engine']],
  ['bench', ['engine']],
];

/**
 * Imports of a module behind a door that a process entry makes before it
 * knows what it will run, so that `tributary --help`, `--version` and the
 * `tributary mirrors` client do not load the whole engine (0.2 s for the
 * logger alone against 0.7 s for the engine's door on the development VM).
 * Both modules import nothing of the engine beyond the resource schemas.
 */
const entryShortcuts: ReadonlyArray<readonly [importer: string, module: string]> = [
  ['bin/tributary.ts', 'engine/src/observability/logger.ts'],
  ['api-server/src/client/mirrors-cli.ts', 'engine/src/catalog/catalog.ts'],
];

const scannedFolders = [...packages, 'bin', 'scripts', 'test', 'bench'];

function sourceFiles(folder: string): string[] {
  const dir = join(repoRoot, folder);
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((name) => /\.(ts|js)$/.test(name) && !name.split(sep).includes('node_modules'))
    .map((name) => join(dir, name))
    .filter((file) => statSync(file).isFile());
}

/** Repository-relative paths of the files a module imports (static and dynamic, relative specifiers). */
function importedFiles(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/(?:from|import)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g)].map((match) =>
    relative(repoRoot, resolve(dirname(file), match[1] ?? '')),
  );
}

function packageOf(path: string): Package | undefined {
  return packages.find((name) => path.startsWith(`${name}/src/`));
}

function frontDoor(name: Package): string {
  return `${name}/src/index.ts`;
}

function isUnitTest(path: string): boolean {
  return path.endsWith('.test.ts');
}

/** Why `importer` may not import `target`, or undefined when it may. */
function violation(importer: string, target: string): string | undefined {
  const targetPackage = packageOf(target);
  const importerPackage = packageOf(importer);
  if (importerPackage !== undefined) {
    if (target.startsWith('test/') || target.startsWith('bench/')) {
      return isUnitTest(importer) && target.startsWith('test/support/')
        ? undefined
        : 'a package imports nothing of test/ or bench/ but a unit test its helpers (test/support/)';
    }
    if (targetPackage === importerPackage) {
      if (target === frontDoor(importerPackage)) return 'a package does not import its own front door';
      if (
        importerPackage === 'engine' &&
        target.startsWith('engine/src/control/') &&
        !importer.startsWith('engine/src/control/') &&
        importer !== frontDoor('engine')
      ) {
        return 'the engine imports its control plane from nowhere but control/';
      }
      return undefined;
    }
    if (targetPackage === undefined) return undefined;
    if (!(layers[importerPackage] as readonly Package[]).includes(targetPackage)) {
      return `${importerPackage} may not import ${targetPackage} (layers: ${JSON.stringify(layers)})`;
    }
  }
  if (targetPackage === undefined || target === frontDoor(targetPackage)) return undefined;
  if (entryShortcuts.some(([from, to]) => from === importer && to === target)) return undefined;
  const tested = internalsTestedBy.find(([folder]) => importer.startsWith(`${folder}/`));
  if (importerPackage === undefined && tested?.[1].includes(targetPackage)) return undefined;
  return `not through the front door ${frontDoor(targetPackage)}`;
}

describe('package front doors', () => {
  const files = scannedFolders.flatMap(sourceFiles).map((file) => relative(repoRoot, file));

  it('scans the whole tree', () => {
    expect(files.length).toBeGreaterThan(300);
    for (const name of packages) expect(files).toContain(frontDoor(name));
  });

  it('every import across packages goes through a front door, downwards', () => {
    const offending = files.flatMap((importer) =>
      importedFiles(join(repoRoot, importer)).flatMap((target) => {
        const why = violation(importer, target);
        return why === undefined ? [] : [`${importer} -> ${target}: ${why}`];
      }),
    );
    expect(offending).toEqual([]);
  });

  it('catches a deep import, an upward one and a control-plane import from the engine', () => {
    expect(violation('api-server/src/main.ts', 'operator/src/kube/kube-store.ts')).toMatch(/front door/);
    expect(violation('operator/src/main.ts', 'engine/src/catalog/postgres-catalog.ts')).toMatch(/front door/);
    expect(violation('engine/src/main.ts', 'operator/src/index.ts')).toMatch(/may not import/);
    expect(violation('operator/src/main.ts', 'api-server/src/index.ts')).toMatch(/may not import/);
    expect(violation('engine/src/pipeline/cdc.ts', 'engine/src/control/store.ts')).toMatch(/control/);
    expect(violation('engine/src/pipeline/cdc.ts', 'engine/src/index.ts')).toMatch(/own front door/);
    expect(violation('test/kube/rbac.test.ts', 'engine/src/errors.ts')).toMatch(/front door/);
    expect(violation('test/kube/rbac.test.ts', 'operator/src/kube/kube-store.ts')).toBeUndefined();
    expect(violation('bench/kafka.ts', 'engine/src/pipeline/cdc.ts')).toBeUndefined();
  });

  it('each shortcut of a process entry is still imported, so the list does not outlive its reason', () => {
    for (const [importer, module] of entryShortcuts) {
      expect(importedFiles(join(repoRoot, importer))).toContain(module);
    }
  });
});

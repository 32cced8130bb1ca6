// Destinations read the source-neutral record model (records.ts, copy-text.ts,
// model/), never the PostgreSQL source's modules: a fourth destination must
// not depend on how the first source decodes its changes. The pipeline reaches
// the source only through the Source contract (source.ts, changes.ts) and the
// registry: it sequences, the connectors do the I/O.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const connectorsDir = dirname(fileURLToPath(import.meta.url));
const engineSrcDir = resolve(connectorsDir, '..');
const postgresDir = join(connectorsDir, 'postgres');
/**
 * The PostgreSQL connector's three folders: the source, the destination and
 * the driver plumbing both use (connections, TLS, quoting, the peer check).
 * The folders are the rule: nothing here lists files.
 */
const postgresSource = join(postgresDir, 'source');
const postgresDestination = join(postgresDir, 'destination');
const postgresDriver = join(postgresDir, 'driver');

/** Every .ts file under `dir`, at any depth. */
function allSourceFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.ts'))
    .map((name) => join(dir, name));
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((name) => name.endsWith('.ts'))
    .map((name) => join(dir, name));
}

/** The files a module imports (static and dynamic imports with a relative specifier), resolved. */
function importedFiles(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specifiers = [...text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)].map(
    (match) => match[1] ?? '',
  );
  return specifiers.map((specifier) => resolve(dirname(file), specifier));
}

function inside(dir: string): (file: string) => boolean {
  return (file) => !relative(dir, file).startsWith('..');
}
const inPostgresFolder = inside(postgresDir);

function shown(file: string): string {
  return relative(engineSrcDir, file);
}

/** `from -> to` for each import of `files` that `forbidden` says no to. */
function importsWhere(files: readonly string[], forbidden: (target: string) => boolean): string[] {
  return files.flatMap((file) =>
    importedFiles(file)
      .filter(forbidden)
      .map((target) => `${shown(file)} -> ${shown(target)}`),
  );
}

describe('connector boundaries', () => {
  it('the PostgreSQL connector is three folders and nothing else', () => {
    expect(sourceFiles(postgresDir)).toEqual([]);
    for (const folder of [postgresSource, postgresDestination, postgresDriver]) {
      expect(allSourceFiles(folder).length).toBeGreaterThan(2);
    }
  });

  it('no other destination folder imports from connectors/postgres/', () => {
    const files = ['clickhouse', 'kafka', 'snowflake', 'memory'].flatMap((folder) =>
      allSourceFiles(join(connectorsDir, folder)),
    );
    expect(files.length).toBeGreaterThan(10);
    expect(importsWhere(files, inPostgresFolder)).toEqual([]);
  });

  it('the PostgreSQL destination imports nothing of the source; the driver neither of them', () => {
    expect(importsWhere(allSourceFiles(postgresDestination), inside(postgresSource))).toEqual([]);
    expect(
      importsWhere(
        allSourceFiles(postgresDriver),
        (target) => inside(postgresSource)(target) || inside(postgresDestination)(target),
      ),
    ).toEqual([]);
  });

  it('the shared connector modules import no PostgreSQL module but the registries their entry', () => {
    const registries = new Map([
      [
        join(connectorsDir, 'registry.ts'),
        [join(postgresDestination, 'destination.ts'), join(postgresSource, 'source.ts')],
      ],
      [join(connectorsDir, 'peer-check.ts'), [join(postgresDriver, 'check.ts')]],
    ]);
    const offending = sourceFiles(connectorsDir).flatMap((file) =>
      importedFiles(file)
        .filter(inPostgresFolder)
        .filter((target) => !registries.get(file)?.includes(target))
        .map((target) => `${shown(file)} -> ${shown(target)}`),
    );
    expect(offending).toEqual([]);
  });

  it('the value model imports no connector', () => {
    const offending = sourceFiles(join(engineSrcDir, 'model')).flatMap((file) =>
      importedFiles(file)
        .filter((target) => !relative(connectorsDir, target).startsWith('..'))
        .map((target) => `${shown(file)} -> ${shown(target)}`),
    );
    expect(offending).toEqual([]);
  });

  it('connectors import nothing of the pipeline, which composes them (script stage: pipeline/mirror-destination.ts)', () => {
    const pipelineDir = join(engineSrcDir, 'pipeline');
    const offending = allSourceFiles(connectorsDir)
      .filter((file) => !file.endsWith('.test.ts'))
      .flatMap((file) =>
        importedFiles(file)
          .filter((target) => !relative(pipelineDir, target).startsWith('..'))
          .map((target) => `${shown(file)} -> ${shown(target)}`),
      );
    expect(offending).toEqual([]);
  });

  it('the pipeline imports no module of connectors/postgres/', () => {
    const files = sourceFiles(join(engineSrcDir, 'pipeline'));
    expect(files.length).toBeGreaterThan(5);
    const offending = files.flatMap((file) =>
      importedFiles(file)
        .filter(inPostgresFolder)
        .map((target) => `${shown(file)} -> ${shown(target)}`),
    );
    expect(offending).toEqual([]);
  });

  it('the pipeline runs no SQL of its own', () => {
    const offending = sourceFiles(join(engineSrcDir, 'pipeline'))
      .filter((file) => !file.endsWith('.test.ts'))
      .filter((file) => /\.query\(|from '(pg|pg-copy-streams)'/.test(readFileSync(file, 'utf8')))
      .map(shown);
    expect(offending).toEqual([]);
  });

  it('driver errors are classified only in connectors/classify/', () => {
    const classifyDir = join(connectorsDir, 'classify');
    const classifiers = allSourceFiles(engineSrcDir).filter((file) =>
      /export function classify\w*Error\b/.test(readFileSync(file, 'utf8')),
    );
    const inside = (file: string) => !relative(classifyDir, file).startsWith('..');
    expect(classifiers.filter(inside).length).toBeGreaterThanOrEqual(5);
    expect(classifiers.filter((file) => !inside(file)).map(shown)).toEqual([]);
  });
});

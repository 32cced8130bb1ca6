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

/** The PostgreSQL driver's plumbing that the PostgreSQL destination shares with the source. */
const sharedPostgresModules = new Set(['connect.ts', 'sql.ts']);
/** The PostgreSQL destination's own modules besides destination.ts, held to the same rule. */
const postgresDestinationModules = new Set([
  'destination-checkpoints.ts',
  'staged-changes.ts',
  'table-changes.ts',
]);

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

function inPostgresFolder(file: string): boolean {
  return !relative(postgresDir, file).startsWith('..');
}

function shown(file: string): string {
  return relative(engineSrcDir, file);
}

describe('connector boundaries', () => {
  it('no destination folder imports from connectors/postgres/', () => {
    const files = ['clickhouse', 'kafka', 'snowflake', 'memory'].flatMap((folder) =>
      sourceFiles(join(connectorsDir, folder)),
    );
    expect(files.length).toBeGreaterThan(10);
    const offending = files.flatMap((file) =>
      importedFiles(file)
        .filter(inPostgresFolder)
        .map((target) => `${shown(file)} -> ${shown(target)}`),
    );
    expect(offending).toEqual([]);
  });

  it('the shared connector modules import no PostgreSQL module but the registries their entry', () => {
    const registries = new Map([
      [
        join(connectorsDir, 'registry.ts'),
        [join(postgresDir, 'destination.ts'), join(postgresDir, 'source.ts')],
      ],
      [join(connectorsDir, 'peer-check.ts'), [join(postgresDir, 'check.ts')]],
    ]);
    const offending = sourceFiles(connectorsDir).flatMap((file) =>
      importedFiles(file)
        .filter(inPostgresFolder)
        .filter((target) => !registries.get(file)?.includes(target))
        .map((target) => `${shown(file)} -> ${shown(target)}`),
    );
    expect(offending).toEqual([]);
  });

  it('the PostgreSQL destination uses only the driver plumbing of the postgres folder', () => {
    const offending = ['destination.ts', ...postgresDestinationModules].flatMap((file) =>
      importedFiles(join(postgresDir, file))
        .filter(inPostgresFolder)
        .filter((target) => {
          const name = relative(postgresDir, target);
          return !sharedPostgresModules.has(name) && !postgresDestinationModules.has(name);
        })
        .map(shown),
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

// The image cannot be built on machines without a Docker engine; this test keeps
// the Dockerfile honest: it parses, builds from node:24-slim in stages, copies
// what the entry point needs, and every role the entry point offers exists.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DockerfileParser } from 'dockerfile-ast';
import { describe, expect, it } from 'vitest';
import { roles } from '../../bin/tributary.ts';
import { repoRoot } from '../support/testenv.ts';

const dockerfile = DockerfileParser.parse(readFileSync(join(repoRoot, 'Dockerfile'), 'utf8'));
const instructions = dockerfile.getInstructions();
const argumentsOf = (keyword: string) =>
  instructions
    .filter((instruction) => instruction.getKeyword() === keyword)
    .map((instruction) => instruction.getArguments().map((argument) => argument.getValue()));

describe('Dockerfile', () => {
  it('builds in stages from node:24-slim', () => {
    const stages = argumentsOf('FROM');
    expect(stages.length).toBeGreaterThanOrEqual(2);
    for (const stage of stages) expect(stage[0]).toBe('node:24-slim');
  });

  it('runs the role entry point as a non-root user', () => {
    expect(argumentsOf('ENTRYPOINT')).toEqual([['["node",', '"bin/tributary.ts"]']]);
    const user = argumentsOf('USER').at(-1)?.[0] ?? 'root';
    expect(user).not.toMatch(/^(root|0)(:|$)/);
  });

  it('copies every source folder a role is loaded from', () => {
    const copiedSources = argumentsOf('COPY').map((copy) => copy[0]);
    for (const modulePath of Object.values(roles)) {
      const sourceFolder = modulePath.split('/').slice(0, 2).join('/');
      expect(copiedSources).toContain(sourceFolder);
    }
    expect(copiedSources).toContain('bin');
  });

  it('offers only roles whose module exists', () => {
    expect(Object.keys(roles).sort()).toEqual(['api-server', 'engine', 'operator', 'standalone']);
    for (const modulePath of Object.values(roles)) expect(existsSync(join(repoRoot, modulePath))).toBe(true);
  });
});

// docs/engine.md's retry policy table is the code's table: a change to one
// without the other fails here.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { EngineError, errorKinds, errorPolicy, tableFault } from './errors.ts';

const healsBySelf = { timed: 'yes: retried with backoff', manual: 'no: fails', never: 'no: fails' } as const;

function policyTableRows(): string[] {
  return errorKinds.map((kind) => {
    const { retry, remedy } = errorPolicy[kind];
    return `| ${kind} | ${retry} | ${healsBySelf[retry]} | ${remedy} |`;
  });
}

describe('error policy table', () => {
  it('docs/engine.md lists every kind with the code policy, in order', () => {
    const docs = readFileSync(new URL('../../docs/engine.md', import.meta.url), 'utf8');
    const rows = docs.split('\n').filter((line) => /^\| [a-z_]+ \| (timed|manual|never) \|/.test(line));
    expect(rows).toEqual(policyTableRows());
  });

  it('retries by itself only what can heal by itself', () => {
    const timed = errorKinds.filter((kind) => errorPolicy[kind].retry === 'timed');
    expect(timed).toEqual([
      'connection',
      'ssh_tunnel',
      'permission',
      'source_permission',
      'destination_write',
      'busy',
      'engine_resource',
      'internal',
    ]);
  });
});

describe('tableFault', () => {
  it('gives a kind a table can own to that table, and leaves the mirror’s own kinds as they are', () => {
    const refused = tableFault(new EngineError('schema_mismatch', 'refused', { cause: 'c' }), 'public.t');
    expect([refused.kind, refused.table, refused.message, refused.cause]).toEqual([
      'schema_mismatch',
      'public.t',
      'refused',
      'c',
    ]);
    // A table already named keeps its name.
    expect(tableFault(refused, 'public.other').table).toBe('public.t');
    for (const kind of ['connection', 'busy', 'destination_write', 'auth'] as const) {
      expect(tableFault(new EngineError(kind, 'down'), 'public.t').table, kind).toBeUndefined();
    }
  });
});

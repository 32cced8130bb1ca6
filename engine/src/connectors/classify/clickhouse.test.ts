import { describe, expect, it } from 'vitest';
import { classifyClickHouseError } from './clickhouse.ts';

describe('classifyClickHouseError: a busy server', () => {
  it('retries too many queries and memory limits as busy', () => {
    for (const code of ['202', '241']) {
      const error = Object.assign(new Error(`Code: ${code}. busy`), { code });
      expect(classifyClickHouseError(error, 'destination: insert', 'destination_write').kind).toBe('busy');
    }
  });
});

describe('classifyClickHouseError: a value the server cannot parse', () => {
  it('does not retry it by itself, from the client error code or an 18.16 message', () => {
    const modern = Object.assign(new Error('Code: 376. DB::Exception: Cannot parse uuid not-a-uuid'), {
      code: '376',
    });
    expect(classifyClickHouseError(modern, 'destination: load', 'destination_write').kind).toBe(
      'schema_mismatch',
    );
    const old = new Error('Code: 69, e.displayText() = DB::Exception: Decimal value is too big');
    expect(classifyClickHouseError(old, 'destination: load', 'destination_write').kind).toBe(
      'schema_mismatch',
    );
  });
});

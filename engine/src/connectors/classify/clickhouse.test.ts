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

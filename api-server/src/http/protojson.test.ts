import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseRequest } from './convert.ts';
import { ApiError } from './errors.ts';
import { lowerCamelCase, normalizeBody, protoEnum } from './protojson.ts';

const color = protoEnum({ RED: 1, GREEN: 2 }, 'expected RED (1) or GREEN (2)');
const schema = z
  .object({
    flow_job_name: z.string().min(1),
    max_batch_size: z.number().int().positive().optional(),
    publication_name: z.string().min(1).optional(),
    do_initial_snapshot: z.boolean(),
    color: color.optional(),
    table_mappings: z
      .array(
        z.object({ source_table_identifier: z.string(), exclude: z.array(z.string()).optional() }).strict(),
      )
      .optional(),
    beforeId: z.union([z.number(), z.string()]).optional(),
    nested: z.object({ idle_timeout: z.number().optional() }).strict().optional(),
  })
  .strict();

describe('normalizeBody', () => {
  it('takes proto names, lowerCamel names and a mix, at every level', () => {
    const expected = {
      flow_job_name: 'pg_to_ch',
      do_initial_snapshot: false,
      table_mappings: [{ source_table_identifier: 'public.t' }],
    };
    for (const body of [
      {
        flow_job_name: 'pg_to_ch',
        do_initial_snapshot: false,
        table_mappings: [{ source_table_identifier: 'public.t' }],
      },
      {
        flowJobName: 'pg_to_ch',
        doInitialSnapshot: false,
        tableMappings: [{ sourceTableIdentifier: 'public.t' }],
      },
      {
        flowJobName: 'pg_to_ch',
        do_initial_snapshot: false,
        tableMappings: [{ source_table_identifier: 'public.t' }],
      },
    ]) {
      expect(normalizeBody(schema, body).value).toEqual(expected);
    }
    // A field declared in lowerCamel takes its proto name too.
    expect(normalizeBody(schema, { before_id: 3 }).value).toEqual({ beforeId: 3 });
  });

  it('refuses one field given in both spellings, naming it as sent', () => {
    expect(() => normalizeBody(schema, { nested: { idle_timeout: 1, idleTimeout: 2 } })).toThrow(
      new ApiError(
        'invalidArgument',
        'nested.idleTimeout: the same field is given twice, as idle_timeout and idleTimeout',
      ),
    );
  });

  it('takes integers as decimal strings and leaves other strings to validation', () => {
    expect(normalizeBody(schema, { max_batch_size: '30', nested: { idleTimeout: '-4' } }).value).toEqual({
      max_batch_size: 30,
      nested: { idle_timeout: -4 },
    });
    expect(normalizeBody(schema, { max_batch_size: '1e3' }).value).toEqual({ max_batch_size: '1e3' });
    // A union with a string keeps the string: 64-bit ids stay exact.
    expect(normalizeBody(schema, { beforeId: '9007199254740993' }).value).toEqual({
      beforeId: '9007199254740993',
    });
  });

  it('takes enums by name or number, and leaves unknown numbers to validation', () => {
    expect(normalizeBody(schema, { color: 2 }).value).toEqual({ color: 'GREEN' });
    expect(normalizeBody(schema, { color: '1' }).value).toEqual({ color: 'RED' });
    expect(normalizeBody(schema, { color: 'GREEN' }).value).toEqual({ color: 'GREEN' });
    expect(normalizeBody(schema, { color: 7 }).value).toEqual({ color: 7 });
  });

  it('drops null, and the zero value of optional fields only', () => {
    expect(
      normalizeBody(schema, {
        flow_job_name: null,
        max_batch_size: 0,
        publication_name: '',
        color: 0,
        table_mappings: [],
        nested: { idle_timeout: '0' },
        do_initial_snapshot: false,
      }).value,
    ).toEqual({ do_initial_snapshot: false });
    // A required field keeps its zero value, so validation sees it.
    expect(normalizeBody(schema, { flow_job_name: '' }).value).toEqual({ flow_job_name: '' });
  });

  it('drops unknown fields and reports them as the client spelled their paths', () => {
    const normalized = normalizeBody(schema, {
      flowJobName: 'm',
      cdcStagingPath: 's3://x',
      tableMappings: [{ sourceTableIdentifier: 't', partitionKey: 'id' }],
    });
    expect(normalized.value).toEqual({
      flow_job_name: 'm',
      table_mappings: [{ source_table_identifier: 't' }],
    });
    expect(normalized.ignoredFields).toEqual(['cdcStagingPath', 'tableMappings[0].partitionKey']);
    expect(normalized.clientPath(['table_mappings', 0, 'source_table_identifier'])).toEqual([
      'tableMappings',
      0,
      'sourceTableIdentifier',
    ]);
  });
});

describe('parseRequest', () => {
  const request = (body: unknown) => {
    const warnings: unknown[] = [];
    return {
      warnings,
      request: {
        body,
        log: { warn: (fields: unknown, message: string) => warnings.push([fields, message]) },
        routeOptions: { url: '/api/v1/test' },
      } as unknown as Parameters<typeof parseRequest>[1],
    };
  };

  it('logs each unknown field once per request, with the endpoint and never the value', () => {
    const { warnings, request: sent } = request({
      flowJobName: 'm',
      doInitialSnapshot: true,
      secretish: 'hunter2',
      tableMappings: [
        { sourceTableIdentifier: 'a', extra: 1 },
        { sourceTableIdentifier: 'b', extra: 2 },
      ],
    });
    parseRequest(schema, sent);
    expect(warnings).toEqual([
      [{ field: 'secretish', endpoint: '/api/v1/test' }, 'ignored unknown request field'],
      [{ field: 'tableMappings[0].extra', endpoint: '/api/v1/test' }, 'ignored unknown request field'],
      [{ field: 'tableMappings[1].extra', endpoint: '/api/v1/test' }, 'ignored unknown request field'],
    ]);
    expect(JSON.stringify(warnings)).not.toContain('hunter2');
  });

  it('names an invalid field as the client spelled it', () => {
    expect(() =>
      parseRequest(schema, request({ flowJobName: 'm', doInitialSnapshot: 'yes' }).request),
    ).toThrow(/^doInitialSnapshot: /);
    expect(() =>
      parseRequest(schema, request({ flow_job_name: 'm', do_initial_snapshot: 1 }).request),
    ).toThrow(/^do_initial_snapshot: /);
  });
});

describe('lowerCamelCase', () => {
  it('follows protoc: underscores dropped, the next character upper case', () => {
    expect(lowerCamelCase('snapshot_num_rows_per_partition')).toBe('snapshotNumRowsPerPartition');
    expect(lowerCamelCase('root_ca')).toBe('rootCa');
    expect(lowerCamelCase('flowJobName')).toBe('flowJobName');
  });
});

import { AuthenticationError, MultipleErrors, NetworkError, ResponseError } from '@platformatic/kafka';
import { describe, expect, it } from 'vitest';
import { EngineError } from '../../errors.ts';
import {
  classifyClickHouseError,
  classifyError,
  classifyKafkaError,
  classifyPgError,
  classifySnowflakeError,
  classifySshError,
  kafkaErrorName,
  topicRefusal,
} from './index.ts';

function pgError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

describe('the side of a fault', () => {
  it('tells the source from the destination where the remedy differs', () => {
    const cases = [
      ['28P01', 'password authentication failed for user "u"', 'source_auth', 'auth'],
      ['28000', 'no pg_hba.conf entry for replication connection', 'source_auth', 'auth'],
      ['42501', 'permission denied for table orders', 'source_permission', 'permission'],
      ['42P01', 'relation "orders" does not exist', 'source_schema', 'schema_mismatch'],
      ['42703', 'column "total" does not exist', 'source_schema', 'schema_mismatch'],
    ] as const;
    for (const [code, message, atSource, atDestination] of cases) {
      const error = pgError(code, message);
      expect(classifyPgError(error, 'source: copy orders', 'internal').kind).toBe(atSource);
      expect(classifyPgError(error, 'destination: sync batch 1', 'destination_write').kind).toBe(
        atDestination,
      );
      expect(classifyPgError(error, 'connect to h:5432/db', 'connection', { side: 'source' }).kind).toBe(
        atSource,
      );
      // A peer check has no side.
      expect(classifyPgError(error, 'peer check: read the server version', 'connection').kind).toBe(
        atDestination,
      );
    }
  });

  it('keeps the kinds whose remedy is the same on both sides', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
    expect(classifyPgError(refused, 'source: replication stream', 'connection').kind).toBe('connection');
    expect(classifyPgError(pgError('53300', 'too many'), 'source: copy t', 'internal').kind).toBe('busy');
  });

  it('names the denied object in a source permission fault too', () => {
    const classified = classifyPgError(
      pgError('42501', 'permission denied for table orders'),
      'source: copy t',
    );
    expect(classified.message).toBe('source: copy t failed (42501): permission denied for table orders');
    expect(classified.policy.retry).toBe('timed');
  });
});

describe('a throwable that is not an Error', () => {
  it('keeps the fallback kind and goes to cause, not into the message', () => {
    const thrown = { secret: 'row value 42' };
    for (const classified of [
      classifyPgError(thrown, 'destination: sync batch 1', 'destination_write'),
      classifyClickHouseError(thrown, 'destination: insert', 'destination_write'),
      classifyKafkaError(thrown, 'destination: send batch 1'),
      classifySnowflakeError(thrown, 'destination: insert'),
      classifySshError('socket hang up', 'ssh tunnel to u@h:22'),
      classifyError('a string', 'mirror run'),
    ]) {
      expect(classified).toBeInstanceOf(EngineError);
      expect(classified.message).toMatch(/ failed$/);
      expect(classified.message).not.toContain('42');
      expect(classified.message).not.toContain('string');
      expect(classified.cause).toBeDefined();
    }
  });
});

describe('classifyKafkaError', () => {
  // The library's own error classes, as its clients throw them.
  it('reads the innermost of the errors @platformatic/kafka wraps', () => {
    const login = new MultipleErrors('Performing connect failed 2 times.', [
      new AuthenticationError('SASL authentication failed.'),
    ]);
    const classified = classifyKafkaError(login, 'destination: connect', 'connection');
    expect([classified.kind, classified.policy.retry]).toEqual(['auth', 'manual']);
    expect(classified.cause).toBe(login);
    const denied = new ResponseError(3, 12, { '/topics/0': [29, null] }, {});
    expect(kafkaErrorName(denied)).toBe('TOPIC_AUTHORIZATION_FAILED');
    expect(classifyKafkaError(denied, 'destination: send batch 2').kind).toBe('permission');
    const exists = new ResponseError(19, 7, { '/topics/0': [36, 'Topic t already exists.'] }, {});
    expect(kafkaErrorName(exists)).toBe('TOPIC_ALREADY_EXISTS');
    const refused = new MultipleErrors('Performing metadata failed 2 times.', [
      new NetworkError('Connection to 127.0.0.1:1 failed.', {
        cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
      }),
    ]);
    expect(classifyKafkaError(refused, 'destination: connect', 'internal').kind).toBe('connection');
    expect(kafkaErrorName(refused)).toBeUndefined();
  });

  it('tells the topics a produce request was refused for, when the refusal is the topic’s', () => {
    const produced = (code: number) =>
      new MultipleErrors('Producing messages failed.', [
        new ResponseError(
          0,
          11,
          { '/responses/0/partition_responses/0': [code, null] },
          {
            responses: [
              { name: 'shop.big', partitionResponses: [{ index: 0, errorCode: code }] },
              { name: 'shop.small', partitionResponses: [{ index: 0, errorCode: 0 }] },
            ],
          },
        ),
      ]);
    const tooLarge = classifyKafkaError(produced(10), 'destination: send batch 3');
    expect(tooLarge.kind).toBe('config');
    expect(topicRefusal(tooLarge)).toEqual({
      topics: ['shop.big'],
      reason:
        "a message larger than the topic's max.message.bytes (or the broker's message.max.bytes) allows",
    });
    expect(topicRefusal(classifyKafkaError(produced(87), 'destination: send batch 3'))?.topics).toEqual([
      'shop.big',
    ]);
    // A leader moving is the brokers', not the topic's.
    expect(topicRefusal(classifyKafkaError(produced(6), 'destination: send batch 3'))).toBeUndefined();
  });
});

describe('classifySnowflakeError', () => {
  function snowflakeError(name: string, code: number | string, sqlState?: string): Error & { code: unknown } {
    return Object.assign(new Error('snowflake says no'), { name, code, sqlState });
  }

  it('maps the driver and server codes', () => {
    const cases = [
      [snowflakeError('NetworkError', 401001), 'connection'],
      [snowflakeError('OperationFailedError', '390144', '08001'), 'auth'],
      [snowflakeError('OperationFailedError', '390100', '08004'), 'auth'],
      [snowflakeError('OperationFailedError', '002003', '42S02'), 'schema_mismatch'],
      [snowflakeError('OperationFailedError', '002003', '02000'), 'schema_mismatch'],
      [snowflakeError('OperationFailedError', '003001', '42501'), 'permission'],
      [snowflakeError('OperationFailedError', '000606', '57P03'), 'config'],
      [snowflakeError('OperationFailedError', '001003', '42000'), 'destination_write'],
      // A row the table refuses, a column gone: the table's own fault (table-faults.ts).
      [snowflakeError('OperationFailedError', '100072', '22000'), 'schema_mismatch'],
      [snowflakeError('OperationFailedError', '100038', '22018'), 'schema_mismatch'],
      [snowflakeError('OperationFailedError', '000904', '42000'), 'schema_mismatch'],
      [snowflakeError('OperationFailedError', '261000'), 'destination_write'],
    ] as const;
    for (const [error, kind] of cases) {
      expect([
        (error as { code: unknown }).code,
        classifySnowflakeError(error, 'destination: x').kind,
      ]).toEqual([(error as { code: unknown }).code, kind]);
    }
  });
});

describe('classifyError: the driver told by its error', () => {
  it('sends each driver error to its classifier', () => {
    const kafka = new NetworkError('Connection to 127.0.0.1:1 failed.');
    expect(classifyError(kafka, 'mirror run').kind).toBe('connection');
    class ClickHouseError extends Error {
      readonly code = '516';
    }
    expect(classifyError(new ClickHouseError('Code: 516. bad password'), 'mirror run').kind).toBe('auth');
    // ClickHouse 18.x errors reach the client as plain Errors of the server's text.
    const old = new Error('Code: 60, e.displayText() = DB::Exception: Table default.t does not exist.');
    expect(classifyError(old, 'mirror run').kind).toBe('schema_mismatch');
    const snowflake = Object.assign(new Error('x'), { name: 'OperationFailedError', code: '390144' });
    expect(classifyError(snowflake, 'mirror run').kind).toBe('auth');
    const ssh = Object.assign(new Error('All configured authentication methods failed'), {
      level: 'client-authentication',
    });
    const tunnel = classifyError(ssh, 'ssh tunnel to u@h:22');
    expect([tunnel.kind, tunnel.message]).toEqual([
      'ssh_tunnel',
      'ssh tunnel to u@h:22: authentication failed',
    ]);
    expect(classifyError(pgError('28P01', 'password authentication failed'), 'mirror run').kind).toBe('auth');
    expect(classifyError(new Error('something else'), 'mirror run').kind).toBe('internal');
  });

  it('passes an EngineError through unchanged', () => {
    const error = new EngineError('script', 'script s failed');
    expect(classifyError(error, 'mirror run')).toBe(error);
  });
});

describe('the engine’s own resources', () => {
  const systemError = (code: string, path?: string) =>
    Object.assign(new Error(`${code}: failed`), { code, syscall: 'mkdtemp', ...(path ? { path } : {}) });

  it('classifies a read-only or full temporary directory as engine_resource, naming the path', () => {
    const readOnly = classifyError(systemError('EROFS', '/tmp/tributary-snowflake-XXXXXX'), 'destination: x');
    expect([readOnly.kind, readOnly.message]).toEqual([
      'engine_resource',
      'destination: x failed (EROFS): the file system is read-only at /tmp/tributary-snowflake-XXXXXX',
    ]);
    expect(readOnly.policy.retry).toBe('timed');
    expect(readOnly.policy.remedy).toMatch(/writable temporary directory/);
    expect(classifyError(systemError('ENOSPC', '/tmp/f'), 'destination: x').kind).toBe('engine_resource');
    expect(classifyError(systemError('ENOMEM'), 'destination: x').kind).toBe('engine_resource');
  });

  it('takes EACCES for the engine’s own only on a path, and never for a server’s answer', () => {
    expect(classifyError(systemError('EACCES', '/tmp/f'), 'destination: x').kind).toBe('engine_resource');
    expect(classifyError(systemError('EACCES'), 'destination: x').kind).toBe('internal');
    // A Snowflake destination's batch file: the driver's classifier defers to it too.
    expect(classifySnowflakeError(systemError('EROFS', '/tmp/f'), 'destination: x').kind).toBe(
      'engine_resource',
    );
  });
});

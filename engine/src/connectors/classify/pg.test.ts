import { describe, expect, it } from 'vitest';
import { classifyPgError, classifySlotState } from './pg.ts';

function pgError(code: string, message: string, detail?: string): Error {
  return Object.assign(new Error(message), { code, ...(detail ? { detail } : {}) });
}

describe('classifyPgError: slot loss', () => {
  // The texts PostgreSQL 13–18 send for a slot that can no longer be read.
  const invalidated = [
    pgError(
      '55000',
      'cannot read from logical replication slot "s"',
      'This slot has been invalidated because it exceeded the maximum reserved size.',
    ),
    pgError(
      '55000',
      'can no longer get changes from replication slot "s"',
      'This slot has been invalidated because it was conflicting with recovery.',
    ),
    pgError(
      '55000',
      'can no longer access replication slot "s"',
      'This replication slot has been invalidated due to "wal_removed".',
    ),
    pgError('55000', 'some future wording', 'This slot has been invalidated because of something new.'),
    pgError('42704', 'replication slot "s" does not exist'),
  ];
  for (const error of invalidated) {
    it(`is slot_invalidated: ${error.message}`, () => {
      const classified = classifyPgError(error, 'source: replication stream', 'connection');
      expect(classified.kind).toBe('slot_invalidated');
      expect(classified.policy.retry).toBe('never');
      expect(classified.policy.remedy).toMatch(/resync/);
      expect(classified.cause).toBe(error);
    });
  }

  it('is wal_removed for removed WAL', () => {
    const error = pgError('58P01', 'requested WAL segment 000000010000000000000003 has already been removed');
    expect(classifyPgError(error, 'source: replication stream', 'connection').kind).toBe('wal_removed');
  });

  it('leaves other 55000 and 42704 errors alone', () => {
    expect(classifyPgError(pgError('55000', 'object is in use'), 'x', 'source_setup').kind).toBe(
      'source_setup',
    );
    expect(classifyPgError(pgError('42704', 'type "foo" does not exist'), 'x', 'config').kind).toBe('config');
  });
});

describe('classifyPgError: a slot of the name already exists', () => {
  it('is config (not retried) for a slot, and leaves other duplicates alone', () => {
    const slot = classifyPgError(
      pgError('42710', 'replication slot "s" already exists'),
      'source: create replication slot s',
      'source_setup',
    );
    expect(slot.kind).toBe('config');
    expect(slot.policy.retry).toBe('manual');
    expect(slot.message).toContain('replication slot s');
    expect(
      classifyPgError(pgError('42710', 'publication "p" already exists'), 'x', 'source_setup').kind,
    ).toBe('source_setup');
  });
});

describe('classifySlotState', () => {
  it('reports a missing, lost or invalidated slot and accepts a usable one', () => {
    expect(classifySlotState('s', undefined)?.kind).toBe('slot_invalidated');
    const usable = { walStatus: 'reserved', invalidationReason: null, conflicting: null };
    expect(classifySlotState('s', { ...usable, walStatus: 'lost' })?.kind).toBe('slot_invalidated');
    expect(classifySlotState('s', { ...usable, invalidationReason: 'rows_removed' })?.message).toMatch(
      /rows_removed/,
    );
    // PostgreSQL 16: a conflict with recovery shows only in `conflicting`.
    expect(classifySlotState('s', { ...usable, conflicting: true })?.kind).toBe('slot_invalidated');
    expect(classifySlotState('s', usable)).toBeUndefined();
    expect(classifySlotState('s', { ...usable, conflicting: false })).toBeUndefined();
    expect(classifySlotState('s', { ...usable, walStatus: 'unreserved' })).toBeUndefined();
  });
});

describe('classifyPgError: faults that heal by themselves', () => {
  it('names the denied object and the privileges needed, keeping the driver text in cause', () => {
    const error = pgError('42501', 'permission denied for table orders');
    const classified = classifyPgError(error, 'destination: sync batch 3', 'destination_write', {
      privileges: 'INSERT on "public"."orders"',
    });
    expect(classified.kind).toBe('permission');
    expect(classified.policy.retry).toBe('timed');
    expect(classified.message).toBe(
      'destination: sync batch 3 failed (42501): permission denied for table orders; it needs INSERT on "public"."orders"',
    );
    expect(classified.cause).toBe(error);
  });

  it('retries too many connections, lock and statement timeouts, disk full and refused sockets', () => {
    for (const code of ['53300', '55P03', '57014', '53100', '40P01']) {
      const classified = classifyPgError(
        pgError(code, 'x'),
        'destination: sync batch 1',
        'destination_write',
      );
      expect([code, classified.kind, classified.policy.retry]).toEqual([code, 'busy', 'timed']);
    }
    // What ran short is named in fixed words; the driver's text stays in `cause`.
    expect(classifyPgError(pgError('55P03', 'row 7 locked'), 'destination: sync batch 2').message).toBe(
      'destination: sync batch 2 failed (55P03): waited too long for a lock another session holds on a table this step writes (pg_locks shows who)',
    );
    expect(classifyPgError(pgError('53100', 'no space'), 'destination: sync batch 2').message).toMatch(
      /\(53100\): the server is out of disk space/,
    );
    expect(classifyPgError(pgError('XX000', 'odd'), 'destination: sync batch 2', 'busy').message).toBe(
      'destination: sync batch 2 failed (XX000)',
    );
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    expect(classifyPgError(refused, 'mirror run', 'internal').kind).toBe('connection');
  });
});

describe('classifyPgError: TLS', () => {
  const tlsError = (code: string, message: string) => Object.assign(new Error(message), { code });

  it('names root_ca when the chain is not trusted', () => {
    const error = classifyPgError(
      tlsError('SELF_SIGNED_CERT_IN_CHAIN', 'self-signed certificate in certificate chain'),
      'connect',
      'connection',
      { tlsMode: 'verify-full' },
    );
    expect(error.kind).toBe('tls');
    expect(error.message).toContain('root_ca must hold the CA that signed it');
  });

  it('names tls_host when the certificate names another server', () => {
    const error = classifyPgError(
      tlsError('ERR_TLS_CERT_ALTNAME_INVALID', "Hostname/IP does not match certificate's altnames"),
      'connect',
    );
    expect(error.kind).toBe('tls');
    expect(error.message).toContain('set tls_host');
  });

  it('says to remove disable_tls when pg_hba.conf wants TLS', () => {
    const error = classifyPgError(
      pgError(
        '28000',
        'pg_hba.conf rejects connection for host "127.0.0.1", user "u", database "d", no encryption',
      ),
      'connect',
      'connection',
      { tlsMode: 'disable' },
    );
    expect(error.kind).toBe('tls');
    expect(error.message).toContain('remove disable_tls');
    // Other pg_hba refusals stay authentication failures.
    expect(
      classifyPgError(pgError('28000', 'no pg_hba.conf entry for host "h", SSL encryption'), 'c').kind,
    ).toBe('auth');
  });

  it('says the server has no TLS when TLS is required', () => {
    const error = classifyPgError(new Error('The server does not support SSL connections'), 'connect');
    expect(error.kind).toBe('tls');
    expect(error.message).toContain('does not offer TLS');
  });
});

describe('classifyPgError: a row the destination refuses', () => {
  const refused = (code: string) =>
    Object.assign(new Error('new row for relation "t" violates check constraint "short_v"'), {
      code,
      constraint: 'short_v',
      detail: 'Failing row contains (1, secret value).',
    });

  it('is schema_mismatch at the destination, naming the constraint and never the row', () => {
    for (const code of ['23514', '23502', '23503', '23505', '22001', '22003']) {
      const classified = classifyPgError(
        refused(code),
        'destination: apply the changes of "t"',
        'destination_write',
      );
      expect(classified.kind, code).toBe('schema_mismatch');
      expect(classified.message).toContain('constraint short_v refused a row');
      expect(classified.message).not.toContain('secret value');
    }
  });

  it('keeps the step’s kind at the source', () => {
    expect(classifyPgError(refused('22021'), 'source: read a chunk', 'internal').kind).toBe('internal');
  });

  it('is busy, retried, when two sessions create the same table at once (a system catalog index)', () => {
    for (const constraint of [
      'pg_type_typname_nsp_index',
      'pg_class_relname_nsp_index',
      'pg_namespace_nspname_index',
    ]) {
      const raced = Object.assign(new Error('duplicate key value violates unique constraint'), {
        code: '23505',
        constraint,
      });
      const classified = classifyPgError(raced, 'destination: create tables', 'destination_write');
      expect(classified.kind, constraint).toBe('busy');
      expect(classified.policy.retry).toBe('timed');
      expect(classified.message).toContain('another session created the same object');
    }
  });
});

import { describe, expect, it } from 'vitest';
import { classifyKafkaError } from './kafka.ts';
import { tlsFailureOf } from './tls.ts';

describe('tlsFailureOf', () => {
  it('names the field to fix for an untrusted server, a wrong host name and a refused client certificate', () => {
    for (const code of ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'SELF_SIGNED_CERT_IN_CHAIN', 'CERT_HAS_EXPIRED']) {
      expect(tlsFailureOf(code)).toEqual({ kind: 'config', detail: expect.stringContaining('set rootCa') });
    }
    expect(tlsFailureOf('ERR_TLS_CERT_ALTNAME_INVALID')?.detail).toMatch(/does not name the host/);
    // Node's names of the alerts a server sends (OpenSSL 3 spells the protocol SSL/TLS or TLSV13).
    for (const code of [
      'ERR_SSL_SSL/TLS_ALERT_BAD_CERTIFICATE',
      'ERR_SSL_SSL/TLS_ALERT_CERTIFICATE_UNKNOWN',
      'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED',
      'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA',
    ]) {
      expect(tlsFailureOf(code)?.kind, code).toBe('auth');
    }
    for (const code of [undefined, 'ECONNREFUSED', 'ERR_SSL_WRONG_VERSION_NUMBER']) {
      expect(tlsFailureOf(code)).toBeUndefined();
    }
  });

  it('is what a Kafka error means once kafkajs has given up retrying', () => {
    // kafkajs: KafkaJSNumberOfRetriesExceeded keeps the last KafkaJSConnectionError as `cause`.
    const connection = Object.assign(new Error('Connection error: unable to verify the first certificate'), {
      name: 'KafkaJSConnectionError',
      code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
    });
    const retries = Object.assign(new Error(connection.message, { cause: connection }), {
      name: 'KafkaJSNumberOfRetriesExceeded',
    });
    const classified = classifyKafkaError(retries, 'kafka', 'connection');
    expect(classified.kind).toBe('config');
    expect(classified.message).toMatch(
      /^kafka failed \(the server's certificate is not trusted .*set rootCa/,
    );
  });
});

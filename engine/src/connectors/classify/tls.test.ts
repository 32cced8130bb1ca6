import { MultipleErrors, NetworkError } from '@platformatic/kafka';
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

  it('is what a Kafka error means once @platformatic/kafka has given up retrying', () => {
    // The retries' MultipleErrors holds the NetworkError, whose `cause` is the socket's error.
    const socket = Object.assign(new Error('unable to verify the first certificate'), {
      code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
    });
    const retries = new MultipleErrors('Performing metadata failed 2 times.', [
      new NetworkError('Connection to 127.0.0.1:9093 failed.', { cause: socket }),
    ]);
    const classified = classifyKafkaError(retries, 'kafka', 'connection');
    expect(classified.kind).toBe('config');
    expect(classified.message).toMatch(
      /^kafka failed \(the server's certificate is not trusted .*set rootCa/,
    );
  });

  it("is read from the connection's own error when a request only says the connection closed", () => {
    // TLS 1.3: the broker checks the client certificate after the handshake and
    // sends an alert; the request in flight fails as a bare close.
    const closed = new MultipleErrors('Performing listApis failed 2 times.', [
      new NetworkError('Connection closed'),
    ]);
    const alert = Object.assign(new Error('tlsv13 alert certificate required'), {
      code: 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED',
    });
    const reported = new NetworkError('Connection error', { cause: alert });
    const classified = classifyKafkaError(closed, 'peer check: connect', 'connection', reported);
    expect(classified.kind).toBe('auth');
    expect(classified.message).toMatch(/refused the client certificate/);
    expect(classified.cause).toBe(closed);
    // Without it, or for a failure that has its own reason, the failure decides.
    expect(classifyKafkaError(closed, 'peer check: connect', 'connection').message).toBe(
      'peer check: connect failed (cannot reach the brokers)',
    );
    const refused = new NetworkError('Connection to 127.0.0.1:1 failed.', {
      cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
    });
    expect(classifyKafkaError(refused, 'peer check: connect', 'connection', reported).kind).toBe(
      'connection',
    );
  });
});

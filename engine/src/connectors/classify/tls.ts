// What a failed TLS handshake means, from the socket error's code, for the
// drivers whose peers name their TLS fields rootCa, certificate and privateKey
// (Kafka). PostgreSQL's own TLS failures are read in pg.ts, in its peer's field names.
import type { ErrorKind } from '../../errors.ts';

/**
 * Node's codes for a server certificate it could not verify: OpenSSL's X.509
 * verification results (https://docs.openssl.org/3.0/man1/openssl-verification-options/)
 * and Node's own host name check.
 */
const untrustedServerCodes: ReadonlySet<string> = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_UNTRUSTED',
  'CERT_SIGNATURE_FAILURE',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/**
 * TLS alerts a server sends when it refuses the client's certificate (or the
 * lack of one), as Node names them: `ERR_SSL_SSL/TLS_ALERT_BAD_CERTIFICATE`,
 * `ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED`, ….
 */
const refusedClientAlert =
  /^ERR_SSL_.*ALERT_(BAD_CERTIFICATE|CERTIFICATE_UNKNOWN|UNKNOWN_CA|CERTIFICATE_REQUIRED|CERTIFICATE_EXPIRED|UNSUPPORTED_CERTIFICATE|CERTIFICATE_REVOKED)$/;

/**
 * What a failed TLS handshake means to the operator, from the socket error's
 * code; undefined when the code is not a certificate problem. Both are
 * configuration: retrying does not make a certificate trusted.
 */
export function tlsFailureOf(code: string | undefined): { kind: ErrorKind; detail: string } | undefined {
  if (!code) return undefined;
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    return {
      kind: 'config',
      detail: `the server's certificate does not name the host connected to (${code})`,
    };
  }
  if (untrustedServerCodes.has(code)) {
    return {
      kind: 'config',
      detail: `the server's certificate is not trusted (${code}); set rootCa to the CA that signed it`,
    };
  }
  if (refusedClientAlert.test(code)) {
    return {
      kind: 'auth',
      detail: `the server refused the client certificate (${code}); set certificate and privateKey to a pair its CA signed`,
    };
  }
  return undefined;
}

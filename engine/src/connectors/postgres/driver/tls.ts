// How a relational peer's TLS fields become the driver's TLS settings. The modes
// are libpq's sslmode values (https://www.postgresql.org/docs/current/libpq-ssl.html),
// so a user who knows `sslmode=verify-full` knows what each combination does:
//
//   nothing set              prefer       TLS when the server offers it, not verified
//   disableTls               disable      never TLS
//   skipCertVerification     require      TLS or fail; the certificate is not checked
//   requireTls and/or rootCa verify-full  TLS or fail; the chain must reach rootCa (or,
//                                          without it, a public CA) and the certificate
//                                          must name tlsHost (or host)
//
// `require_tls` alone verifies against the public CAs Node ships (and
// NODE_EXTRA_CA_CERTS), as libpq's `sslrootcert=system` does: a server behind a
// public CA (Neon, Azure) needs nothing more, and a private CA (RDS, Cloud SQL,
// Supabase) is refused with an error naming root_ca instead of being trusted
// blindly. Certificate checks never look at the address the driver dials, which
// is the loopback end of the SSH tunnel when there is one.
import { X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import { type ConnectionOptions, checkServerIdentity, type PeerCertificate } from 'node:tls';
import { EngineError } from '../../../errors.ts';
import type { RelationalConfig } from '../../../resources/peer.ts';

export type PostgresTlsMode = 'disable' | 'prefer' | 'require' | 'verify-full';

export interface PostgresTls {
  readonly mode: PostgresTlsMode;
  /** The name the certificate must carry (verify-full) and the SNI name when it is not an address. */
  readonly serverName: string;
  /** What `pg` takes as `ssl`; false in `disable` mode. */
  readonly ssl: false | ConnectionOptions;
}

type TlsFields = Pick<
  RelationalConfig,
  'host' | 'requireTls' | 'disableTls' | 'rootCa' | 'tlsHost' | 'skipCertVerification'
>;

const pemCertificate = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/** The certificates of a PEM bundle; throws a config error when it holds none or a broken one. */
export function parseRootCa(rootCa: string): string[] {
  const blocks = rootCa.match(pemCertificate) ?? [];
  if (blocks.length === 0) {
    throw new EngineError('config', 'root_ca: expected PEM certificates (-----BEGIN CERTIFICATE-----)');
  }
  blocks.forEach((block, index) => {
    try {
      new X509Certificate(block);
    } catch (cause) {
      throw new EngineError('config', `root_ca: certificate ${index + 1} of ${blocks.length} is not valid`, {
        cause,
      });
    }
  });
  return blocks;
}

function conflicts(config: TlsFields): string[] {
  const found: string[] = [];
  if (config.disableTls) {
    if (config.requireTls) found.push('disable_tls with require_tls');
    if (config.rootCa) found.push('disable_tls with root_ca');
    if (config.skipCertVerification) found.push('disable_tls with skip_cert_verification');
  }
  if (config.skipCertVerification && config.rootCa) {
    found.push('skip_cert_verification with root_ca (a CA is only used to verify)');
  }
  return found;
}

/** The TLS settings of a peer; throws a config error for contradictory fields. */
export function postgresTls(config: TlsFields): PostgresTls {
  const contradictions = conflicts(config);
  if (contradictions.length > 0) {
    throw new EngineError('config', `peer TLS settings contradict each other: ${contradictions.join('; ')}`);
  }
  const serverName = config.tlsHost ?? config.host;
  // SNI carries host names only (RFC 6066, section 3).
  const sni = isIP(serverName) === 0 ? { servername: serverName } : {};
  if (config.disableTls) return { mode: 'disable', serverName, ssl: false };
  if (config.skipCertVerification) {
    return { mode: 'require', serverName, ssl: { ...sni, rejectUnauthorized: false } };
  }
  if (config.requireTls || config.rootCa) {
    return {
      mode: 'verify-full',
      serverName,
      ssl: {
        ...sni,
        rejectUnauthorized: true,
        ...(config.rootCa ? { ca: parseRootCa(config.rootCa) } : {}),
        // The driver would check the name it dialled (127.0.0.1 through a tunnel).
        checkServerIdentity: (_dialled: string, certificate: PeerCertificate) =>
          checkServerIdentity(serverName, certificate),
      },
    };
  }
  return { mode: 'prefer', serverName, ssl: { ...sni, rejectUnauthorized: false } };
}

/** What `pg` says when it asked for TLS and the server answered that it has none. */
export function isTlsNotOffered(error: unknown): boolean {
  return error instanceof Error && error.message === 'The server does not support SSL connections';
}

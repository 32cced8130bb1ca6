import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseHostKey, warnUnverifiedHostKey } from './ssh-tunnel.ts';

// An ed25519 public key blob (RFC 8709): string "ssh-ed25519", string key.
function ed25519Line(): { line: string; blob: Buffer } {
  const { publicKey } = generateKeyPairSync('ed25519');
  const raw = publicKey.export({ format: 'der', type: 'spki' }).subarray(-32);
  const name = Buffer.from('ssh-ed25519');
  const blob = Buffer.concat([
    Buffer.from([0, 0, 0, name.length]),
    name,
    Buffer.from([0, 0, 0, raw.length]),
    raw,
  ]);
  return { line: `ssh-ed25519 ${blob.toString('base64')} root@host`, blob };
}

describe('parseHostKey', () => {
  it('reads authorized_keys and known_hosts lines', () => {
    const { line, blob } = ed25519Line();
    expect(parseHostKey(line).equals(blob)).toBe(true);
    expect(parseHostKey(`[bastion.example.com]:2222,10.0.0.1 ${line}`).equals(blob)).toBe(true);
  });

  it('refuses a line whose blob is of another type or that is no key', () => {
    const { blob } = ed25519Line();
    expect(() => parseHostKey(`ssh-rsa ${blob.toString('base64')}`)).toThrow(/ssh_config.host_key/);
    expect(() => parseHostKey('SHA256:abcdef')).toThrow(/ssh_config.host_key/);
  });
});

describe('warnUnverifiedHostKey', () => {
  it('warns once per peer, and only without a host key', () => {
    const warnings: string[] = [];
    const warn = (message: string) => warnings.push(message);
    warnUnverifiedHostKey('unit-peer-a', { hostKey: 'ssh-ed25519 AAAA' }, warn);
    warnUnverifiedHostKey('unit-peer-a', undefined, warn);
    expect(warnings).toEqual([]);
    warnUnverifiedHostKey('unit-peer-a', {}, warn);
    warnUnverifiedHostKey('unit-peer-a', {}, warn);
    warnUnverifiedHostKey('unit-peer-b', {}, warn);
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toContain('peer unit-peer-a: the ssh tunnel does not verify');
  });
});

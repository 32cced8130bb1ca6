// Log sequence numbers as unsigned 64-bit bigints. PostgreSQL prints an LSN as
// two upper-case hex halves, `X/Y` (the pg_lsn type,
// https://www.postgresql.org/docs/current/datatype-pg-lsn.html); the replication
// protocol sends it as a big-endian Int64.
import { EngineError } from '../errors.ts';

const lsnText = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/;
const maxLsn = 0xffff_ffff_ffff_ffffn;

/** Parses `16/B374D848` into a bigint; throws EngineError kind 'decode' on anything else. */
export function parseLsn(text: string): bigint {
  const match = lsnText.exec(text);
  if (match === null) {
    throw new EngineError('decode', `invalid LSN ${JSON.stringify(text.slice(0, 40))}: expected hex X/Y`);
  }
  return (BigInt(`0x${match[1]}`) << 32n) | BigInt(`0x${match[2]}`);
}

/** Formats an LSN as PostgreSQL does: upper-case hex halves without leading zeros. */
export function formatLsn(lsn: bigint): string {
  if (lsn < 0n || lsn > maxLsn) {
    throw new EngineError('internal', `LSN ${lsn} is outside the unsigned 64-bit range`);
  }
  return `${(lsn >> 32n).toString(16).toUpperCase()}/${(lsn & 0xffff_ffffn).toString(16).toUpperCase()}`;
}

// A gzip-compressed tar archive of text files, in the POSIX ustar format
// (https://pubs.opengroup.org/onlinepubs/9799919799/utilities/pax.html, "ustar
// Interchange Format"), which every tar reads: `tar xzf bundle.tar.gz`.
import { gzipSync } from 'node:zlib';

export interface ArchiveEntry {
  /** Relative, with `/` between folders. */
  readonly path: string;
  readonly content: string | Buffer;
}

const block = 512;

/** `value` in octal, zero-padded to `width - 1` digits and NUL-terminated, as ustar stores numbers. */
function octal(value: number, width: number): string {
  const digits = value.toString(8);
  if (digits.length > width - 1)
    throw new RangeError(`${value} does not fit a ustar field of ${width} bytes`);
  return `${digits.padStart(width - 1, '0')}\0`;
}

/** ustar's name (100 bytes) and prefix (155 bytes): a longer path is split at a `/`. */
function splitPath(path: string): { name: string; prefix: string } {
  if (Buffer.byteLength(path) <= 100) return { name: path, prefix: '' };
  for (let at = path.indexOf('/'); at >= 0; at = path.indexOf('/', at + 1)) {
    const prefix = path.slice(0, at);
    const name = path.slice(at + 1);
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(name) <= 100) return { name, prefix };
  }
  throw new RangeError(`path too long for a ustar archive: ${path}`);
}

function header(path: string, size: number, mtimeSeconds: number): Buffer {
  const bytes = Buffer.alloc(block);
  const { name, prefix } = splitPath(path);
  const put = (text: string, offset: number) => bytes.write(text, offset, 'utf8');
  put(name, 0);
  put(octal(0o644, 8), 100);
  put(octal(0, 8), 108); // uid
  put(octal(0, 8), 116); // gid
  put(octal(size, 12), 124);
  put(octal(mtimeSeconds, 12), 136);
  put('        ', 148); // the checksum field counts as spaces while the checksum is computed
  put('0', 156); // a regular file
  put('ustar\0', 257);
  put('00', 263);
  put(prefix, 345);
  let checksum = 0;
  for (const byte of bytes) checksum += byte;
  put(`${checksum.toString(8).padStart(6, '0')}\0 `, 148);
  return bytes;
}

export function tarGzip(entries: readonly ArchiveEntry[], modified: Date): Buffer {
  const mtimeSeconds = Math.floor(modified.getTime() / 1000);
  const parts: Buffer[] = [];
  for (const entry of entries) {
    const content = typeof entry.content === 'string' ? Buffer.from(entry.content, 'utf8') : entry.content;
    parts.push(header(entry.path, content.length, mtimeSeconds), content);
    const padding = (block - (content.length % block)) % block;
    if (padding > 0) parts.push(Buffer.alloc(padding));
  }
  // The end of the archive: two zero blocks.
  parts.push(Buffer.alloc(2 * block));
  return gzipSync(Buffer.concat(parts));
}

// The process logger of every role: JSON lines for machines (log collectors read
// stdout), or colourised human lines for a person at a terminal. `auto` picks by
// whether stdout is a terminal; `--log-format` or TRIBUTARY_LOG_FORMAT override it.
// pino-pretty is loaded only when chosen, so the JSON path loads and does nothing
// more than plain pino.
import { createRequire } from 'node:module';
import pino, { type Logger, type LoggerOptions } from 'pino';
import { peerSecretPaths, secretMask } from '../resources/peer.ts';

export const logFormats = ['auto', 'json', 'pretty'] as const;
export type LogFormatSetting = (typeof logFormats)[number];
export type LogFormat = Exclude<LogFormatSetting, 'auto'>;

export function isLogFormatSetting(value: string): value is LogFormatSetting {
  return (logFormats as readonly string[]).includes(value);
}

/**
 * The format asked for in TRIBUTARY_LOG_FORMAT (the entry point sets it from
 * `--log-format`); throws naming the variable when the value is not one of ours.
 */
export function logFormatFromEnvironment(env: NodeJS.ProcessEnv = process.env): LogFormatSetting {
  const value = env.TRIBUTARY_LOG_FORMAT?.trim() || 'auto';
  if (!isLogFormatSetting(value))
    throw new Error(
      `TRIBUTARY_LOG_FORMAT: expected one of ${logFormats.join(', ')}, got ${JSON.stringify(value)}`,
    );
  return value;
}

export function resolveLogFormat(setting: LogFormatSetting, stdoutIsTerminal: boolean): LogFormat {
  if (setting !== 'auto') return setting;
  return stdoutIsTerminal ? 'pretty' : 'json';
}

export interface ProcessLoggerOptions {
  /** A pino level name (pino refuses others). */
  readonly level: string;
  /** Default: from the environment (logFormatFromEnvironment). */
  readonly format?: LogFormatSetting;
  /** Fields on every line (e.g. the role), instead of pino's pid and hostname. */
  readonly base?: Record<string, unknown>;
  /** Where lines go (default stdout); its `isTTY` decides `auto`. */
  readonly stream?: NodeJS.WritableStream & { readonly isTTY?: boolean; readonly fd?: number };
}

/**
 * Field names whose values are never written, at any depth up to `redactDepth`:
 * every peer secret field (from the peer schemas' list) and the HTTP
 * authorization header. Secrets are kept out of log calls in the first place;
 * this is the second line of defence for an object logged whole by mistake.
 */
export const redactedFieldNames: readonly string[] = [
  ...new Set([
    ...Object.values(peerSecretPaths)
      .flat()
      .map((path) => path.split('.').at(-1) ?? path),
    'authorization',
  ]),
];

/** How deep a secret field is looked for: a peer inside a mirror's engine config is 5 levels down. */
const redactDepth = 7;

/** pino's redact paths: each name at the top level and under 1…redactDepth wildcard levels. */
export const redactPaths: readonly string[] = redactedFieldNames.flatMap((name) =>
  Array.from({ length: redactDepth + 1 }, (_, depth) => [...Array(depth).fill('*'), name].join('.')),
);

type PrettyFactory = (options: Record<string, unknown>) => NodeJS.WritableStream;

export function createProcessLogger(options: ProcessLoggerOptions): Logger {
  const stream = options.stream ?? process.stdout;
  const format = resolveLogFormat(options.format ?? logFormatFromEnvironment(), stream.isTTY === true);
  const loggerOptions: LoggerOptions = {
    level: options.level,
    redact: { paths: [...redactPaths], censor: secretMask },
    ...(options.base ? { base: options.base } : {}),
  };
  if (format === 'json') return options.stream ? pino(loggerOptions, options.stream) : pino(loggerOptions);
  // In this thread, synchronously: a worker-thread transport would add a thread
  // and lose the last lines of a crash; a terminal is slow anyway.
  const pretty = createRequire(import.meta.url)('pino-pretty') as PrettyFactory;
  return pino(
    loggerOptions,
    pretty({
      // stdout by its descriptor, written synchronously like pino's own default.
      destination: options.stream ?? 1,
      sync: true,
      translateTime: 'SYS:HH:MM:ss.l',
      ignore: 'pid,hostname',
      singleLine: true,
    }),
  );
}

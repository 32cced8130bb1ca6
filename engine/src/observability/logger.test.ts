import { createRequire } from 'node:module';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { peerSchema, secretMask } from '../resources/peer.ts';
import { createProcessLogger, logFormatFromEnvironment, resolveLogFormat } from './logger.ts';

/** A stream that keeps what is written, and says whether it is a terminal. */
function capture(isTTY: boolean) {
  const chunks: string[] = [];
  const stream = Object.assign(
    new Writable({
      write(chunk, _encoding, done) {
        chunks.push(String(chunk));
        done();
      },
    }),
    { isTTY },
  );
  return { stream, text: () => chunks.join('') };
}

const prettyLoaded = () =>
  Object.keys(createRequire(import.meta.url).cache).some((path) => path.includes('/pino-pretty/'));

describe('process logger', () => {
  it('writes JSON lines when stdout is not a terminal, without loading the pretty printer', () => {
    const { stream, text } = capture(false);
    createProcessLogger({ level: 'info', format: 'auto', base: { role: 'test' }, stream }).info(
      { mirror: 'orders' },
      'mirror paused',
    );
    expect(JSON.parse(text())).toMatchObject({
      level: 30,
      role: 'test',
      mirror: 'orders',
      msg: 'mirror paused',
    });
    expect(prettyLoaded()).toBe(false);
  });

  it('writes one human line per entry on a terminal', () => {
    const { stream, text } = capture(true);
    createProcessLogger({ level: 'info', format: 'auto', stream }).info(
      { mirror: 'orders' },
      'mirror paused',
    );
    const line = text();
    expect(line).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] .*INFO.*: .*mirror paused.* \{?.*mirror.*orders/);
    expect(line.trimEnd().split('\n')).toHaveLength(1);
    expect(() => JSON.parse(line)).toThrow();
  });

  it('follows an explicit format whatever stdout is', () => {
    const json = capture(true);
    createProcessLogger({ level: 'info', format: 'json', stream: json.stream }).warn('slow');
    expect(JSON.parse(json.text())).toMatchObject({ level: 40, msg: 'slow' });
    const pretty = capture(false);
    createProcessLogger({ level: 'info', format: 'pretty', stream: pretty.stream }).warn('slow');
    expect(pretty.text()).toMatch(/WARN.*: slow/);
  });

  it('picks the format from auto, json or pretty', () => {
    expect(resolveLogFormat('auto', true)).toBe('pretty');
    expect(resolveLogFormat('auto', false)).toBe('json');
    expect(resolveLogFormat('json', true)).toBe('json');
    expect(resolveLogFormat('pretty', false)).toBe('pretty');
  });

  it('reads TRIBUTARY_LOG_FORMAT and names it when the value is wrong', () => {
    expect(logFormatFromEnvironment({})).toBe('auto');
    expect(logFormatFromEnvironment({ TRIBUTARY_LOG_FORMAT: 'pretty' })).toBe('pretty');
    expect(() => logFormatFromEnvironment({ TRIBUTARY_LOG_FORMAT: 'xml' })).toThrow(
      /TRIBUTARY_LOG_FORMAT: expected one of auto, json, pretty/,
    );
  });
});

describe('redaction', () => {
  const peer = peerSchema.parse({
    name: 'source',
    kind: 'relational',
    config: {
      host: 'db',
      port: 5432,
      user: 'u',
      password: 'pg-password-value',
      database: 'd',
      sshConfig: {
        host: 'bastion',
        port: 22,
        user: 'jump',
        password: 'ssh-password-value',
        privateKey: 'ssh-key-value',
      },
    },
  });
  const secretValues = [
    'pg-password-value',
    'ssh-password-value',
    'ssh-key-value',
    'ch-password-value',
    'ch-private-key-value',
    's3-secret-value',
    'sf-key-value',
    'kafka-password-value',
  ];
  const others = [
    {
      kind: 'analytics',
      config: {
        password: 'ch-password-value',
        privateKey: 'ch-private-key-value',
        secretAccessKey: 's3-secret-value',
      },
    },
    { kind: 'datawarehouse', config: { privateKey: 'sf-key-value' } },
    { kind: 'stream', config: { password: 'kafka-password-value' } },
  ];

  for (const format of ['json', 'pretty'] as const) {
    it(`writes no secret of a peer logged whole at debug (${format})`, () => {
      const { stream, text } = capture(false);
      const logger = createProcessLogger({ level: 'debug', format, stream }).child({ mirror: 'orders' });
      logger.debug({ peer }, 'peer');
      logger.debug(peer.config, 'config at the top level');
      logger.debug({ engineConfig: { mirror: { name: 'orders' }, source: peer, others } }, 'engine config');
      logger.debug({ req: { headers: { authorization: 'Basic c2VjcmV0' } } }, 'request');
      const output = text();
      expect(output).toContain('bastion');
      expect(output).toContain(secretMask);
      for (const value of [...secretValues, 'Basic c2VjcmV0']) expect(output).not.toContain(value);
    });
  }
});

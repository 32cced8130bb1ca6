#!/usr/bin/env node
// The one entry point of the image and of `npm start`: the first argument picks
// the role, the rest goes to that role's `main`. bin/tributary.js checks the
// Node version before loading this file; run directly, this file checks it too.
import { enableCompileCache } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { isLogFormatSetting, logFormats } from '../engine/src/observability/logger.ts';
import { restartWithRoleFlags } from './node-flags.js';
import { exitUnlessNodeIsRecentEnough } from './node-version.js';
import { buildVersion, formatVersion } from './version.ts';

export const roles = {
  standalone: 'api-server/src/standalone.ts',
  'api-server': 'api-server/src/main.ts',
  operator: 'operator/src/main.ts',
  engine: 'engine/src/main.ts',
} as const;

export type Role = keyof typeof roles;

/** One line each for `tributary --help`. */
export const roleDescriptions = {
  standalone: 'the /api/v1 interface, the reconciler and every mirror in one process, state in a directory',
  'api-server': 'the /api/v1 interface over Kubernetes custom resources and the catalog database',
  operator: 'reconciles Peer, Mirror and Script resources; runs one engine StatefulSet per mirror',
  engine: 'replicates one mirror from a mounted config (started by the operator)',
} as const satisfies Record<Role, string>;

/** Clients of a running service, beside the roles that are the service. */
export const commands = {
  mirrors: 'api-server/src/client/mirrors-cli.ts',
  kubectl: 'operator/src/kubectl/main.ts',
  credentials: 'api-server/src/client/credentials-cli.ts',
} as const;

export const commandDescriptions = {
  mirrors: 'list, status, pause, resume, drop and logs of mirrors, through /api/v1',
  kubectl: 'the kubectl plugin (kubectl tributary): Mirrors through the Kubernetes API, and support bundles',
  credentials: 'hash: a line of a credentials file, an API credential with a role (read, operate, admin)',
} as const satisfies Record<keyof typeof commands, string>;

export function usage(): string {
  const width = Math.max(...[...Object.keys(roles), ...Object.keys(commands)].map((name) => name.length));
  const lines = Object.entries(roleDescriptions).map(
    ([role, description]) => `  ${role.padEnd(width)}  ${description}`,
  );
  return [
    `usage: tributary <${Object.keys(roles).join('|')}> [options]`,
    '       tributary mirrors <list|status|pause|resume|drop|logs> [name] [options]',
    '       tributary kubectl <list|status|pause|resume|logs|report> [name] [options]',
    '       tributary credentials hash USER ROLE [--token-stdin]',
    '       tributary --help | --version',
    '',
    'Roles:',
    ...lines,
    '',
    'Commands:',
    ...Object.entries(commandDescriptions).map(
      ([command, description]) => `  ${command.padEnd(width)}  ${description}`,
    ),
    '',
    'Options of every role:',
    `  --log-format ${logFormats.join('|')}  log lines as JSON or coloured text (TRIBUTARY_LOG_FORMAT;`,
    '                           default auto: text on a terminal, JSON otherwise)',
    '',
    '`tributary <role> --help` lists the options of a role.',
  ].join('\n');
}

function isRole(value: string | undefined): value is Role {
  return value !== undefined && Object.hasOwn(roles, value);
}

/**
 * Takes `--log-format X` (or `--log-format=X`) out of a role's arguments: it
 * applies to every role, which reads it from TRIBUTARY_LOG_FORMAT.
 */
export function takeLogFormat(args: readonly string[]): { rest: string[]; logFormat?: string } {
  const rest: string[] = [];
  let logFormat: string | undefined;
  for (let index = 0; index < args.length; index++) {
    const arg = args[index] ?? '';
    if (arg === '--log-format') {
      logFormat = args[index + 1] ?? '';
      index++;
    } else if (arg.startsWith('--log-format=')) {
      logFormat = arg.slice('--log-format='.length);
    } else {
      rest.push(arg);
    }
  }
  return logFormat === undefined ? { rest } : { rest, logFormat };
}

interface RoleModule {
  main(argv: readonly string[]): Promise<number>;
}

interface CommandModule {
  /** `version`: the line `--version` prints, for a command that records it (a support bundle). */
  main(argv: readonly string[], version: () => string): Promise<number>;
}

export async function run(argv: readonly string[]): Promise<void> {
  const [role, ...rest] = argv;
  if (role === '--help' || role === '-h' || role === 'help') {
    console.log(usage());
    return;
  }
  if (role === '--version' || role === '-V' || role === 'version') {
    console.log(formatVersion(buildVersion()));
    return;
  }
  if (role !== undefined && Object.hasOwn(commands, role)) {
    const modulePath = join(import.meta.dirname, '..', commands[role as keyof typeof commands]);
    const command = (await import(pathToFileURL(modulePath).href)) as CommandModule;
    process.exitCode = await command.main(rest, () => formatVersion(buildVersion()));
    return;
  }
  if (!isRole(role)) {
    console.error(
      role === undefined ? usage() : `tributary: unknown role ${JSON.stringify(role)}\n\n${usage()}`,
    );
    process.exitCode = 2;
    return;
  }
  const { rest: roleArgs, logFormat } = takeLogFormat(rest);
  if (logFormat !== undefined) process.env.TRIBUTARY_LOG_FORMAT = logFormat;
  const requestedFormat = process.env.TRIBUTARY_LOG_FORMAT?.trim() || 'auto';
  if (!isLogFormatSetting(requestedFormat)) {
    console.error(
      `tributary: --log-format (or TRIBUTARY_LOG_FORMAT) must be one of ${logFormats.join(', ')}, not ${JSON.stringify(requestedFormat)}`,
    );
    process.exitCode = 2;
    return;
  }
  // V8's compiled code of every module, kept on disk (os.tmpdir()/node-compile-cache):
  // the next start loads the role's modules in about half the time. Where the
  // directory cannot be written (a read-only root fs) Node carries on without it;
  // NODE_DISABLE_COMPILE_CACHE=1 turns it off.
  enableCompileCache();
  const modulePath = join(import.meta.dirname, '..', roles[role]);
  const roleModule = (await import(pathToFileURL(modulePath).href)) as RoleModule;
  endProcess(await roleModule.main(roleArgs));
}

/** How long a role's process may take to end by itself after the role returned. */
export const exitGraceMs = 3_000;

/**
 * Ends the process with `code` after a role returned: by itself as soon as
 * nothing is left to do, else (a watch, socket or timer a library left open)
 * by `process.exit` after `exitGraceMs`.
 *
 * Not `process.exit` at once: on Node 24 it can hang for good
 * (nodejs/node#54918). It stops V8's worker threads while the JavaScript heap
 * still lives, and a concurrent compile job that is waiting there for a garbage
 * collection on the main thread then waits forever: `standalone --help` was
 * caught so in CI, its main thread in WorkerThreadsTaskRunner::Shutdown and a
 * worker in a baseline compile job in CollectionBarrier::AwaitCollectionBackground
 * (docs/testing.md). A process that ends by itself disposes of the heap first,
 * which releases such jobs. By the time the fallback runs, the compile jobs of
 * start-up are long done.
 */
export function endProcess(code: number): void {
  process.exitCode = code;
  setTimeout(() => process.exit(code), exitGraceMs).unref();
}

if (import.meta.main) {
  exitUnlessNodeIsRecentEnough();
  // Started as `node bin/tributary.ts` (the image's entry point), not through bin/tributary.js.
  restartWithRoleFlags(process.argv[2]);
  await run(process.argv.slice(2));
}

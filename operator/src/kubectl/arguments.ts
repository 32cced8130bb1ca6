// The plugin's command line: `kubectl tributary <command> [mirror] [options]`,
// parsed once into what the commands read. kubectl passes a plugin every
// argument after its name and none of its own flags, so the kubeconfig,
// context and namespace flags are the plugin's own, spelled as kubectl's.
import { parseArgs } from 'node:util';
import { usageError } from './plugin-error.ts';

export const commands = ['list', 'status', 'pause', 'resume', 'logs', 'report'] as const;
export type Command = (typeof commands)[number];

export const outputFormats = ['table', 'json', 'yaml'] as const;
export type OutputFormat = (typeof outputFormats)[number];

/** Lines of each engine and operator container's log `logs` prints and `report` keeps. */
export const defaultTailLines = { logs: 200, report: 2000 } as const;

export const pluginUsage = `usage: kubectl tributary <command> [mirror] [options]
       (the same program: kubectl-tributary, or tributary kubectl)

Commands:
  list                every Mirror: source, destination, phase, Ready, lag, tables
  status MIRROR       the Mirror, its tables, its replication slot and its conditions
  pause MIRROR        set spec.state to Paused: the engine stops at its next batch boundary
  resume MIRROR       set spec.state to Running, or retry a failed mirror
  logs MIRROR         the recent log of the mirror's engine pod (through the Kubernetes API)
  report [MIRROR]     a support bundle (.tar.gz): the resources, conditions, Events,
                      engine and operator logs and metrics, with every secret redacted

Options:
  -n, --namespace NS  the namespace (default: the context's, else default)
  -A, --all-namespaces  list: the Mirrors of every namespace
      --context NAME  the kubeconfig context (default: its current context)
      --kubeconfig F  the kubeconfig file (default: KUBECONFIG, else ~/.kube/config)
  -o, --output F      list, status: table (default), json or yaml
      --tail N        logs, report: the last N lines of each log (default ${defaultTailLines.logs}; report ${defaultTailLines.report})
  -p, --previous      logs: the previous container's log (the one that crashed)
  -f, --file PATH     report: where to write the bundle (default
                      tributary-report-<namespace>[-<mirror>]-<time>.tar.gz here)
  -h, --help          this text

Exit status: 0 done, 1 the cluster refused or lacks what was asked, 2 a wrong command line.`;

export interface PluginArguments {
  readonly command: Command;
  /** The Mirror's object name (or its API name: both lead to the object). */
  readonly mirror: string | undefined;
  readonly output: OutputFormat;
  readonly namespace: string | undefined;
  readonly allNamespaces: boolean;
  readonly context: string | undefined;
  readonly kubeconfig: string | undefined;
  readonly tailLines: number;
  readonly previous: boolean;
  readonly file: string | undefined;
}

/** What was asked: help, or a command. */
export type Parsed = { readonly help: true } | { readonly help: false; readonly arguments: PluginArguments };

const needsMirror: readonly Command[] = ['status', 'pause', 'resume', 'logs'];

function isOneOf<T extends string>(values: readonly T[], value: string | undefined): value is T {
  return value !== undefined && (values as readonly string[]).includes(value);
}

export function parsePluginArguments(argv: readonly string[]): Parsed {
  let parsed: ReturnType<typeof parseCommandLine>;
  try {
    parsed = parseCommandLine(argv);
  } catch (error) {
    throw usageError(`${(error as Error).message}\n\n${pluginUsage}`);
  }
  const { values, positionals } = parsed;
  const [command, mirror, ...extra] = positionals;
  if (values.help || command === 'help' || command === undefined) return { help: true };
  if (!isOneOf(commands, command))
    throw usageError(`unknown command ${JSON.stringify(command)}\n\n${pluginUsage}`);
  if (needsMirror.includes(command) && mirror === undefined)
    throw usageError(`${command} needs a mirror name`);
  const unexpected = command === 'list' ? mirror : extra[0];
  if (unexpected !== undefined) throw usageError(`unexpected argument ${JSON.stringify(unexpected)}`);
  const output = values.output ?? 'table';
  if (!isOneOf(outputFormats, output)) throw usageError(`-o: one of ${outputFormats.join(', ')}`);
  const allowed = (option: string, given: boolean, commandsTakingIt: readonly Command[]) => {
    if (given && !commandsTakingIt.includes(command))
      throw usageError(`${option} applies to ${commandsTakingIt.join(' and ')} only`);
  };
  allowed('-o', values.output !== undefined, ['list', 'status']);
  allowed('-A', values['all-namespaces'] === true, ['list']);
  allowed('--tail', values.tail !== undefined, ['logs', 'report']);
  allowed('--previous', values.previous === true, ['logs']);
  allowed('--file', values.file !== undefined, ['report']);
  if (values['all-namespaces'] && values.namespace !== undefined)
    throw usageError('-A and -n exclude each other');
  const tailDefault = command === 'report' ? defaultTailLines.report : defaultTailLines.logs;
  return {
    help: false,
    arguments: {
      command,
      mirror,
      output,
      namespace: values.namespace,
      allNamespaces: values['all-namespaces'] === true,
      context: values.context,
      kubeconfig: values.kubeconfig,
      tailLines: wholeNumber(values.tail, '--tail', tailDefault),
      previous: values.previous === true,
      file: values.file,
    },
  };
}

function wholeNumber(value: string | undefined, option: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^\d{1,9}$/.test(value) || Number(value) < 1) throw usageError(`${option}: a whole number ≥ 1`);
  return Number(value);
}

function parseCommandLine(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      namespace: { type: 'string', short: 'n' },
      'all-namespaces': { type: 'boolean', short: 'A' },
      context: { type: 'string' },
      kubeconfig: { type: 'string' },
      output: { type: 'string', short: 'o' },
      tail: { type: 'string' },
      previous: { type: 'boolean', short: 'p' },
      file: { type: 'string', short: 'f' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

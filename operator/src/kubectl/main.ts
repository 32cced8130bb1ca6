// `kubectl tributary`: Tributary's resources as a kubectl plugin, with the
// user's kubeconfig and permissions, through the API server alone (docs/kubectl-plugin.md).
// kubectl runs `kubectl-tributary` from PATH (bin/kubectl-tributary.js); the
// same program is `tributary kubectl` (bin/tributary.ts).
import { type PluginArguments, parsePluginArguments, pluginUsage } from './arguments.ts';
import { connectToCluster } from './cluster.ts';
import { listCommand, logsCommand, stateCommand, statusCommand } from './commands.ts';
import { PluginError } from './plugin-error.ts';
import { writeReport } from './report/report-file.ts';

export interface PluginIo {
  readonly env: NodeJS.ProcessEnv;
  readonly cwd: string;
  readonly now: () => Date;
  /** The program's version line (`tributary 0.1.0 (commit …)`), for a report's README. */
  readonly version: () => string;
}

export interface PluginOutcome {
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
}

async function runCommand(args: PluginArguments, io: PluginIo): Promise<string> {
  const cluster = connectToCluster(args, io.env);
  const mirror = args.mirror ?? '';
  switch (args.command) {
    case 'list':
      return listCommand(cluster, args);
    case 'status':
      return statusCommand(cluster, args, mirror);
    case 'pause':
    case 'resume':
      return stateCommand(cluster, args.command, mirror);
    case 'logs':
      return logsCommand(cluster, args, mirror);
    case 'report':
      return writeReport(cluster, {
        mirror: args.mirror,
        tailLines: args.tailLines,
        file: args.file,
        cwd: io.cwd,
        now: io.now(),
        version: io.version(),
      });
  }
}

/** Runs one command line; what to print and the exit code. */
export async function runPlugin(argv: readonly string[], io: PluginIo): Promise<PluginOutcome> {
  try {
    const parsed = parsePluginArguments(argv);
    if (parsed.help) return { exitCode: 0, stdout: pluginUsage, stderr: '' };
    return { exitCode: 0, stdout: await runCommand(parsed.arguments, io), stderr: '' };
  } catch (error) {
    if (!(error instanceof PluginError)) throw error;
    return { exitCode: error.exitCode, stdout: '', stderr: `kubectl tributary: ${error.message}` };
  }
}

/** The command's entry (bin/tributary.ts): prints, and returns the exit code. */
export async function main(
  argv: readonly string[],
  version: () => string = () => 'tributary',
): Promise<number> {
  const outcome = await runPlugin(argv, {
    env: process.env,
    cwd: process.cwd(),
    now: () => new Date(),
    version,
  });
  if (outcome.stdout) console.log(outcome.stdout);
  if (outcome.stderr) console.error(outcome.stderr);
  return outcome.exitCode;
}

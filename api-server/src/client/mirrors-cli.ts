// `tributary mirrors …`: a small client of the /api/v1 interface for a terminal.
// It only calls the interface and prints its answers (the facade decides
// everything), so it works against standalone mode and the api-server alike.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { logLevelFilters } from '../../../engine/src/catalog/catalog.ts';

/** A table as `tables` of /api/v1/mirrors/status answers it (docs/api.md). */
interface StatusTable {
  sourceTableIdentifier: string;
  destinationTableIdentifier: string;
  state: string;
  rowsApplied: { inserts: string; updates: string; deletes: string };
  lastCommitTime?: string;
  error?: { kind: string; message: string; remedy: string };
  behindLsn?: string;
}

/** `  public.orders → public.orders: streaming, initial load done (250 rows), applied 2 inserts, …`. */
function tableLine(
  table: StatusTable,
  load: { consolidateCompleted: boolean; numRowsSynced: string } | undefined,
): string {
  const { inserts, updates, deletes } = table.rowsApplied;
  const parts = [
    table.state.replace(/^TABLE_STATE_/, '').toLowerCase(),
    ...(load
      ? [`initial load ${load.consolidateCompleted ? 'done' : 'running'} (${load.numRowsSynced} rows)`]
      : []),
    `applied ${inserts} inserts, ${updates} updates, ${deletes} deletes`,
    ...(table.lastCommitTime ? [`last commit ${table.lastCommitTime}`] : []),
  ];
  const line = `  ${table.sourceTableIdentifier} → ${table.destinationTableIdentifier}: ${parts.join(', ')}`;
  if (!table.error) return line;
  return `${line}\n    ${table.error.kind}: ${table.error.message} (behind from LSN ${table.behindLsn ?? '?'}); ${table.error.remedy}`;
}

export const mirrorsUsage = `usage: tributary mirrors <command> [name] [options]

Commands:
  list                 every mirror with its state and peers
  status NAME          state, error and tables of one mirror
  pause NAME           pause (the engine stops at a batch boundary)
  resume NAME          resume a paused mirror, or retry a failed one
  drop NAME            drop: removes its replication slot and publication
  logs NAME            the mirror's log entries, newest first
  resync NAME TABLE    load TABLE (schema.table) of the mirror again: online
                       beside the live table while it streams, or a table
                       stopped on a fault of its own (errored) from nothing

Options:
  --url URL            the service (TRIBUTARY_URL; default http://127.0.0.1:8112)
  --password-file F    a file holding the API password (TRIBUTARY_API_PASSWORD_FILE;
                       or the password itself in TRIBUTARY_API_PASSWORD)
  --level L            logs: error, warn, info or all (default all)
  --page N             logs: page N of --per-page entries (default 1)
  --per-page N         logs: entries per page (default 20)
  --json               print the API's JSON answer instead of text`;

const commands = ['list', 'status', 'pause', 'resume', 'drop', 'logs', 'resync'] as const;
type Command = (typeof commands)[number];

/** The state_change request of each action: the interface's own enum names. */
const requestedStates = {
  pause: 'STATUS_PAUSED',
  resume: 'STATUS_RUNNING',
  drop: 'STATUS_TERMINATING',
} as const;

/** A refusal with the message to print and the exit code (2: usage, 1: the service said no). */
export class CliError extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode: number) {
    super(message);
    this.name = 'CliError';
    this.exitCode = exitCode;
  }
}

interface Connection {
  readonly url: string;
  readonly authorization: string | undefined;
}

async function call(
  connection: Connection,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<Record<string, unknown>> {
  let response: Response;
  try {
    response = await fetch(new URL(path, connection.url), {
      method,
      headers: {
        ...(connection.authorization ? { authorization: connection.authorization } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (error) {
    throw new CliError(`cannot reach ${connection.url}: ${(error as Error).message}`, 1);
  }
  const text = await response.text();
  let answer: Record<string, unknown>;
  try {
    answer = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw new CliError(`${method} ${path}: the service answered ${response.status} without JSON`, 1);
  }
  if (!response.ok) {
    const message = answer.message ?? answer.errorMessage ?? `status ${response.status}`;
    throw new CliError(`${method} ${path}: ${response.status}: ${String(message)}`, 1);
  }
  return answer;
}

function connectionFrom(
  values: { url?: string; 'password-file'?: string },
  env: NodeJS.ProcessEnv,
): Connection {
  const url = values.url ?? env.TRIBUTARY_URL ?? 'http://127.0.0.1:8112';
  try {
    new URL(url);
  } catch {
    throw new CliError(`--url: not a URL: ${url}`, 2);
  }
  const passwordFile = values['password-file'] ?? env.TRIBUTARY_API_PASSWORD_FILE;
  let password = env.TRIBUTARY_API_PASSWORD;
  if (passwordFile) {
    try {
      password = readFileSync(passwordFile, 'utf8').trim();
    } catch (error) {
      throw new CliError(`cannot read the password file ${passwordFile}: ${(error as Error).message}`, 2);
    }
  }
  return {
    url,
    // The interface's Basic authentication with an empty user name.
    authorization: password ? `Basic ${Buffer.from(`:${password}`).toString('base64')}` : undefined,
  };
}

function positiveInteger(value: string | undefined, option: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^\d{1,9}$/.test(value) || Number(value) < 1)
    throw new CliError(`${option}: expected a whole number ≥ 1`, 2);
  return Number(value);
}

const stateWord = (state: unknown) =>
  String(state ?? 'STATUS_UNKNOWN')
    .replace(/^STATUS_/, '')
    .toLowerCase();

function table(rows: readonly (readonly string[])[]): string {
  const widths =
    rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? [];
  return rows
    .map((row) =>
      row
        .map((cell, column) => cell.padEnd(widths[column] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** Runs one command; returns what to print. */
export async function runMirrorsCommand(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<string> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    throw new CliError(`${(error as Error).message}\n\n${mirrorsUsage}`, 2);
  }
  const { values, positionals } = parsed;
  if (values.help) return mirrorsUsage;
  const [command, name, ...rest] = positionals;
  // `resync` takes the table after the mirror's name.
  const [tableName, ...extra] = command === 'resync' ? rest : [undefined, ...rest];
  if (!commands.includes(command as Command))
    throw new CliError(
      command ? `unknown command ${JSON.stringify(command)}\n\n${mirrorsUsage}` : mirrorsUsage,
      2,
    );
  if (command !== 'list' && !name) throw new CliError(`${command} needs a mirror name`, 2);
  if (command === 'resync' && !tableName) throw new CliError('resync needs a table (schema.table)', 2);
  if (extra.length > 0 || (command === 'list' && name))
    throw new CliError(`unexpected argument ${JSON.stringify(extra[0] ?? name)}`, 2);
  const connection = connectionFrom(values, env);
  const json = (answer: unknown) => JSON.stringify(answer, null, 2);

  switch (command as Command) {
    case 'list': {
      const { mirrors } = (await call(connection, 'GET', '/api/v1/mirrors/list')) as {
        mirrors: { name: string; sourceName: string; destinationName: string }[];
      };
      const states = await Promise.all(
        mirrors.map(async (mirror) => {
          const status = await call(connection, 'POST', '/api/v1/mirrors/status', {
            flowJobName: mirror.name,
          });
          return { ...mirror, state: status.currentFlowState, errorMessage: status.errorMessage };
        }),
      );
      if (values.json) return json({ mirrors: states });
      if (states.length === 0) return 'no mirrors';
      return table([
        ['NAME', 'STATE', 'SOURCE', 'DESTINATION', 'ERROR'],
        ...states.map((mirror) => [
          mirror.name,
          stateWord(mirror.state),
          mirror.sourceName,
          mirror.destinationName,
          String(mirror.errorMessage ?? ''),
        ]),
      ]);
    }
    case 'status': {
      const status = await call(connection, 'POST', '/api/v1/mirrors/status', {
        flowJobName: name,
        includeFlowInfo: true,
      });
      if (values.json) return json(status);
      const cdc = status.cdcStatus as
        | {
            config: { sourceName: string; destinationName: string };
            snapshotStatus: {
              clones: {
                sourceTable: string;
                tableName: string;
                numRowsSynced: string;
                consolidateCompleted: boolean;
              }[];
            };
          }
        | undefined;
      const lag = status.lagSeconds === undefined ? '' : `, lag ${String(status.lagSeconds)} s`;
      const lines = [`mirror ${name}: ${stateWord(status.currentFlowState)}${lag}`];
      if (status.errorMessage) lines.push(`error: ${String(status.errorMessage)}`);
      const slot = status.slotHealth as { status: string; reason: string; message: string } | undefined;
      if (slot) {
        const verdict =
          slot.status === 'True' ? 'healthy' : slot.status === 'False' ? 'unhealthy' : 'unknown';
        lines.push(`slot: ${verdict} (${slot.reason}): ${slot.message}`);
      }
      if (cdc) {
        lines.push(`${cdc.config.sourceName} → ${cdc.config.destinationName}`);
        const tables = (status.tables ?? []) as StatusTable[];
        const loads = new Map(cdc.snapshotStatus.clones.map((clone) => [clone.sourceTable, clone]));
        for (const table of tables) lines.push(tableLine(table, loads.get(table.sourceTableIdentifier)));
        // Loads of tables the catalog tracks no state for yet (a mirror set up before tables had states).
        const tracked = new Set(tables.map((table) => table.sourceTableIdentifier));
        for (const clone of cdc.snapshotStatus.clones.filter((clone) => !tracked.has(clone.sourceTable)))
          lines.push(
            `  ${clone.sourceTable} → ${clone.tableName}: initial load ${clone.consolidateCompleted ? 'done' : 'running'}, ${clone.numRowsSynced} rows`,
          );
      }
      return lines.join('\n');
    }
    case 'pause':
    case 'resume':
    case 'drop': {
      const requestedFlowState = requestedStates[command as 'pause' | 'resume' | 'drop'];
      const answer = await call(connection, 'POST', '/api/v1/mirrors/state_change', {
        flowJobName: name,
        requestedFlowState,
      });
      return values.json ? json(answer) : `${command}: requested for mirror ${name}`;
    }
    case 'resync': {
      const answer = await call(connection, 'POST', '/api/v1/mirrors/tables/resync', {
        flowJobName: name,
        sourceTableIdentifier: tableName,
      });
      return values.json ? json(answer) : `resync: requested for table ${tableName} of mirror ${name}`;
    }
    case 'logs': {
      const level = (values.level ?? 'all').toUpperCase();
      if (!(logLevelFilters as readonly string[]).includes(level))
        throw new CliError('--level: error, warn, info or all', 2);
      const answer = (await call(connection, 'POST', '/api/v1/mirrors/logs', {
        flowJobName: name,
        level,
        page: positiveInteger(values.page, '--page', 1),
        numPerPage: positiveInteger(values['per-page'], '--per-page', 20),
      })) as {
        errors: {
          errorTimestamp: number;
          errorType: string;
          errorMessage: string;
          repeatCount?: number;
          lastErrorTimestamp?: number;
        }[];
        total: number;
      };
      if (values.json) return json(answer);
      if (answer.errors.length === 0) return `no log entries (${answer.total} in all)`;
      return answer.errors
        .map(
          (entry) =>
            `${new Date(entry.errorTimestamp).toISOString()} ${entry.errorType.padEnd(5)} ${entry.errorMessage}${
              (entry.repeatCount ?? 1) > 1
                ? ` (${entry.repeatCount} times, last at ${new Date(entry.lastErrorTimestamp ?? entry.errorTimestamp).toISOString()})`
                : ''
            }`,
        )
        .join('\n');
    }
  }
}

function parse(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      url: { type: 'string' },
      'password-file': { type: 'string' },
      level: { type: 'string' },
      page: { type: 'string' },
      'per-page': { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

/** The role's entry (bin/tributary.ts): prints, and returns the exit code. */
export async function main(argv: readonly string[]): Promise<number> {
  try {
    console.log(await runMirrorsCommand(argv, process.env));
    return 0;
  } catch (error) {
    if (!(error instanceof CliError)) throw error;
    console.error(`tributary mirrors: ${error.message}`);
    return error.exitCode;
  }
}

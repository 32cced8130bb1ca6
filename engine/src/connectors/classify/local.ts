// The engine's own resources: a file system call of the engine process that
// failed (a read-only or full temporary directory, no descriptors or memory
// left), whichever connector made it. Such an error says nothing about a
// peer, so no driver's classifier may take it for the server's: a Snowflake
// destination's batch file that cannot be created is not a Snowflake fault.
import { EngineError } from '../../errors.ts';

/** errno codes of the engine's own file system and process limits, with what to tell the operator. */
const localResourceProblems: ReadonlyMap<string, string> = new Map([
  ['EROFS', 'the file system is read-only'],
  ['ENOSPC', 'the file system is full'],
  ['EDQUOT', 'the disk quota is exhausted'],
  ['EMFILE', 'the process has no file descriptor left'],
  ['ENFILE', 'the system has no file descriptor left'],
  ['ENOMEM', 'the process is out of memory'],
  ['EACCES', 'the engine user may not write there'],
  ['EPERM', 'the engine user may not write there'],
]);

interface SystemError {
  readonly code?: unknown;
  readonly syscall?: unknown;
  readonly path?: unknown;
}

/**
 * What a local resource failure says, or undefined when `error` is not one.
 * EACCES and EPERM count only on a path (a file call): on a socket they are
 * the network's.
 */
function localProblem(error: unknown): { code: string; problem: string; path?: string } | undefined {
  if (!(error instanceof Error)) return undefined;
  const { code, path } = error as SystemError;
  if (typeof code !== 'string') return undefined;
  const problem = localResourceProblems.get(code);
  if (!problem) return undefined;
  if ((code === 'EACCES' || code === 'EPERM') && typeof path !== 'string') return undefined;
  return { code, problem, ...(typeof path === 'string' ? { path } : {}) };
}

/** True when `error` is a failure of the engine's own file system or memory (see localProblem). */
export function isLocalResourceError(error: unknown): boolean {
  return localProblem(error) !== undefined;
}

/**
 * Classifies a failure of the engine's own file system or memory as
 * `engine_resource`, naming the path (a temporary file's, never a secret) and
 * the errno; undefined when `error` is not one.
 */
export function classifyLocalResourceError(error: unknown, what: string): EngineError | undefined {
  const local = localProblem(error);
  if (!local) return undefined;
  const where = local.path ? ` at ${local.path}` : '';
  return new EngineError('engine_resource', `${what} failed (${local.code}): ${local.problem}${where}`, {
    cause: error,
  });
}

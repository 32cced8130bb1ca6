// Node flags a role needs from its first instruction, given by starting Node
// again with them: process.execve replaces the program in place (same process
// id, same standard streams and environment). V8 reads such flags once, before
// any code runs (v8.setFlagsFromString is too late for its compilers), and
// NODE_OPTIONS refuses V8 flags like --liftoff-only.
// Plain JavaScript that Node versions far older than the one we need can parse:
// bin/tributary.js imports it before the version check has run.

/**
 * standalone: its embedded database (PGlite) is PostgreSQL compiled to
 * WebAssembly. V8 hands the hot functions of a WebAssembly module to its
 * optimizing compiler, TurboFan, which needed about 600 MB of compiler memory
 * for one of PGlite's, seconds after start: a peak of about 780 MiB for a
 * process that then idles at 240. Liftoff, V8's baseline WebAssembly compiler,
 * compiles each function once and small. And the engine runs in the same
 * process: while a mirror loads and streams, V8 let its heap grow to 660–730
 * MiB of resident memory before collecting; --optimize-for-size makes it
 * collect sooner (about 310 MiB), for about 30% less CDC throughput
 * (docs/startup.md, Memory). Engine pods keep V8's defaults: their only
 * WebAssembly is the Lua interpreter of scripts, and their heap has a limit.
 */
export var roleNodeFlags = { standalone: ['--liftoff-only', '--optimize-for-size'] };

/** V8 reads `--a_b` as `--a-b`, and `--no-a-b` or `--noa-b` as turning `--a-b` off. */
function namesFlag(argument, flag) {
  var name = String(argument).split('=')[0].replace(/_/g, '-');
  var wanted = flag.replace(/_/g, '-').slice(2);
  return name === `--${wanted}` || name === `--no-${wanted}` || name === `--no${wanted}`;
}

/**
 * The arguments (after the program's path) to start Node again with: the
 * missing `flags` first, then the Node options it was given, then the script
 * and its arguments. Undefined when nothing is missing; a flag given by hand
 * in either sense (`--liftoff-only`, `--no-liftoff-only`) counts as given, so
 * the restarted process never restarts again.
 */
export function restartArguments(flags, execArgv, argv) {
  var missing = flags.filter((flag) => !execArgv.some((argument) => namesFlag(argument, flag)));
  if (missing.length === 0) return undefined;
  return missing.concat(execArgv, argv.slice(1));
}

/**
 * Starts Node again with the flags of `role` when it runs without them;
 * returns when there is nothing to do or it cannot: on a Node without
 * process.execve (before 23.11) or a platform without it, the role runs with
 * V8's defaults. Call it before the role loads anything.
 */
export function restartWithRoleFlags(role) {
  var flags = Object.hasOwn(roleNodeFlags, role) ? roleNodeFlags[role] : undefined;
  if (!flags || typeof process.execve !== 'function') return;
  var args = restartArguments(flags, process.execArgv, process.argv);
  if (!args) return;
  try {
    process.execve(process.execPath, [process.execPath].concat(args), process.env);
  } catch (_unavailable) {
    // Refused before the system call (ERR_FEATURE_UNAVAILABLE_ON_PLATFORM on Windows).
  }
}

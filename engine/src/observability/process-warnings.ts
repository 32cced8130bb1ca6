// Node's process warnings as log lines. Node prints a warning (a deprecation,
// a library's negative timer, `TimeoutNegativeWarning` on Node 24) as plain
// text on stderr, which a log collector reading a pod's JSON lines cannot
// parse. Every role routes them through its
// process logger instead, as structured `warn` lines.
import type { Logger } from 'pino';

/**
 * Replaces Node's printing of process warnings (a 'warning' listener of its
 * own, installed at start-up unless --no-warnings) with one `warn` line each.
 */
export function logProcessWarnings(logger: Logger): void {
  process.removeAllListeners('warning');
  process.on('warning', (warning) => {
    const code = (warning as Error & { code?: unknown }).code;
    logger.warn(
      {
        warning: {
          name: warning.name,
          ...(typeof code === 'string' ? { code } : {}),
          message: warning.message,
        },
      },
      `process warning: ${warning.name}`,
    );
  });
}

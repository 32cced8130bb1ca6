// The one way a command of the kubectl plugin fails: a message for the person
// at the terminal and the exit code (2: the command line was wrong; 1: the
// cluster refused, lacks or could not be reached for what was asked).
export class PluginError extends Error {
  readonly exitCode: 1 | 2;

  constructor(message: string, exitCode: 1 | 2 = 1) {
    super(message);
    this.name = 'PluginError';
    this.exitCode = exitCode;
  }
}

/** A wrong command line: said with the usage's exit code. */
export function usageError(message: string): PluginError {
  return new PluginError(message, 2);
}

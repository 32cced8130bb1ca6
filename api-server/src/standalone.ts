// Entry point of standalone mode (`npm start`, the README's run command): the
// facade, reconcilers and engines in one process with embedded state. Until the
// facade lands it states what it will run and exits non-zero.
export async function main(_argv: readonly string[]): Promise<number> {
  console.error(
    [
      'tributary standalone: not available in this build yet.',
      'It will serve the /api/v1 facade on one port, keep peers, mirrors, scripts and the',
      'catalog in an embedded data directory, and run every mirror engine in this process.',
    ].join('\n'),
  );
  return 1;
}

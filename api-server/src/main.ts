// Entry point of the `api-server` role (see bin/tributary.ts). The role is not part
// of this build yet: it says so and exits non-zero rather than pretending to run.
export async function main(_argv: readonly string[]): Promise<number> {
  console.error('tributary api-server: this role is not available in this build yet');
  return 1;
}

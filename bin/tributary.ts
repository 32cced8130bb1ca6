#!/usr/bin/env node
import { join } from 'node:path';
// The one entry point of the image and of `npm start`: the first argument picks
// the role, the rest goes to that role's `main`.
import { pathToFileURL } from 'node:url';

export const roles = {
  standalone: 'api-server/src/standalone.ts',
  'api-server': 'api-server/src/main.ts',
  operator: 'operator/src/main.ts',
  engine: 'engine/src/main.ts',
} as const;

export type Role = keyof typeof roles;

function isRole(value: string | undefined): value is Role {
  return value !== undefined && Object.hasOwn(roles, value);
}

interface RoleModule {
  main(argv: readonly string[]): Promise<number>;
}

async function run(): Promise<void> {
  const [role, ...rest] = process.argv.slice(2);
  if (!isRole(role)) {
    console.error(`usage: tributary <${Object.keys(roles).join('|')}> [options]`);
    process.exitCode = 2;
    return;
  }
  const modulePath = join(import.meta.dirname, '..', roles[role]);
  const roleModule = (await import(pathToFileURL(modulePath).href)) as RoleModule;
  // A role returns once it has shut down cleanly; watches, sockets or timers a
  // library left open must not keep the process alive after that.
  process.exit(await roleModule.main(rest));
}

if (import.meta.main) await run();

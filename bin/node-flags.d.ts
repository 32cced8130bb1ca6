// Types of node-flags.js, which stays plain JavaScript so old Node can parse it.
export declare const roleNodeFlags: { readonly [role: string]: readonly string[] };
export declare function restartArguments(
  flags: readonly string[],
  execArgv: readonly string[],
  argv: readonly string[],
): string[] | undefined;
export declare function restartWithRoleFlags(role: string | undefined): void;

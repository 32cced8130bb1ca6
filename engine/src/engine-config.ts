// The file an engine process runs from (`engine run --config`). The operator
// writes it from a Mirror, its Peers and their Secrets, and mounts it read-only;
// standalone mode builds the same object in memory.
import { readFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { EngineError } from './errors.ts';
import { mirrorSpecSchema } from './resources/mirror.ts';
import { peerSchema, relationalConfigSchema } from './resources/peer.ts';
import { scriptSourceSchema } from './resources/script.ts';

export const engineConfigSchema = z.object({
  mirror: mirrorSpecSchema,
  source: relationalConfigSchema,
  destination: peerSchema,
  catalog: z.object({ url: z.string().min(1) }),
  script: scriptSourceSchema.optional(),
  batchMemoryBudgetBytes: z
    .number()
    .int()
    .min(1024 * 1024)
    .optional(),
});

export type EngineConfig = z.infer<typeof engineConfigSchema>;

/** Reads and validates the config file; errors name the field, never a value. */
export async function loadEngineConfig(path: string): Promise<EngineConfig> {
  let raw: unknown;
  try {
    raw = parseYaml(await readFile(path, 'utf8'));
  } catch (cause) {
    throw new EngineError('config', `cannot read engine config ${path}`, { cause });
  }
  const parsed = engineConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.map(
      (issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`,
    );
    throw new EngineError('config', `invalid engine config ${path}: ${problems.join('; ')}`);
  }
  return parsed.data;
}

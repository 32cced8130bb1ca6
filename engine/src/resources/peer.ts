// Peer resources as the engine sees them: the non-secret configuration plus the
// secrets resolved from wherever they are stored (a Kubernetes Secret, the
// standalone secret store). The facade's wire shapes and the CRD schema are
// derived from these definitions.
import { z } from 'zod';

const hostSchema = z.string().min(1).max(253);
const portSchema = z.number().int().min(1).max(65_535);

export const sshConfigSchema = z
  .object({
    host: hostSchema,
    port: portSchema,
    user: z.string().min(1),
    password: z.string().optional(),
    privateKey: z.string().optional(),
  })
  .refine((ssh) => Boolean(ssh.password || ssh.privateKey), {
    message: 'ssh tunnel needs a password or a private key',
  });

export const relationalConfigSchema = z.object({
  host: hostSchema,
  port: portSchema,
  user: z.string().min(1),
  password: z.string(),
  database: z.string().min(1),
  sshConfig: sshConfigSchema.optional(),
});

export const peerKinds = ['relational'] as const;
export type PeerKind = (typeof peerKinds)[number];

export const peerSchema = z.discriminatedUnion('kind', [
  z.object({ name: z.string().min(1), kind: z.literal('relational'), config: relationalConfigSchema }),
]);

export type SshConfig = z.infer<typeof sshConfigSchema>;
export type RelationalConfig = z.infer<typeof relationalConfigSchema>;
export type Peer = z.infer<typeof peerSchema>;

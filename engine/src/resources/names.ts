// The names of mirrors, peers and scripts: one rule in both modes. It is the
// original interface's rule for mirror names (`^[a-z_][a-z0-9_]*$`, so
// `pg_to_ch_orders` works) widened by what this service always took: a leading
// digit and `-`. Upper case and `.` are refused everywhere: names become parts
// of replication slot and publication names, which PostgreSQL folds to lower
// case, and a name that means two things in two modes is worse than a 400.
// Cluster mode stores such a name on an object whose Kubernetes name is derived
// from it (operator/src/kube/object-names.ts).
import { z } from 'zod';

export const resourceNamePattern = /^[a-z0-9_][a-z0-9_-]*$/;

export const resourceNameRule = '1 to 63 lower-case letters, digits, _ and -, not starting with -';

/** A mirror, peer or script name as the API and the stores take it. */
export const resourceNameSchema = z.string().min(1).max(63).regex(resourceNamePattern, resourceNameRule);

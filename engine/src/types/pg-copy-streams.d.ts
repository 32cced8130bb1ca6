// pg-copy-streams ships `both` (COPY BOTH, used by streaming replication) but its
// published type definitions predate it.
import type { Duplex, DuplexOptions } from 'node:stream';
import type { Connection, Submittable } from 'pg';

declare module 'pg-copy-streams' {
  export interface CopyBothOptions extends DuplexOptions {
    /** Push one chunk per CopyData message instead of arbitrary byte runs. */
    alignOnCopyDataFrame?: boolean;
  }
  export class CopyBothQueryStream extends Duplex implements Submittable {
    submit(connection: Connection): void;
  }
  export function both(txt: string, options?: CopyBothOptions): CopyBothQueryStream;
}

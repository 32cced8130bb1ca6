// The physical floor of a PostgreSQL-to-PostgreSQL load: the source's
// `COPY … TO STDOUT` piped straight into the target's `COPY … FROM STDIN`,
// no parsing, no transformation.
import { pipeline } from 'node:stream/promises';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import type { TestDatabase } from '../../test/support/databases.ts';

export async function copyPipe(
  source: TestDatabase,
  sourceTable: string,
  target: TestDatabase,
  targetTable: string,
) {
  const columns = 'id, account, amount, note, created';
  await pipeline(
    source.client.query(copyTo(`COPY ${sourceTable} (${columns}) TO STDOUT`)),
    target.client.query(copyFrom(`COPY ${targetTable} (${columns}) FROM STDIN`)),
  );
}

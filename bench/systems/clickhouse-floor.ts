// The physical floor of a PostgreSQL-to-ClickHouse load: the source's
// `COPY … TO STDOUT (FORMAT csv)` streamed as the body of one ClickHouse
// `INSERT … FORMAT CSV` over HTTP, no parsing on our side.
import { request } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { to as copyTo } from 'pg-copy-streams';
import type { AnalyticsConfig } from '../../engine/src/resources/peer.ts';
import type { TestDatabase } from '../../test/support/databases.ts';

/** One statement over ClickHouse's HTTP interface; returns its text answer. */
export async function clickhouseQuery(
  config: AnalyticsConfig,
  query: string,
  body?: NodeJS.ReadableStream,
): Promise<string> {
  const url = new URL(`http://${config.host}:${config.httpPort}/`);
  url.searchParams.set('query', query);
  return new Promise((resolve, reject) => {
    const call = request(
      url,
      {
        method: 'POST',
        headers: { 'X-ClickHouse-User': config.user, 'X-ClickHouse-Key': config.password },
      },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          text += chunk;
        });
        response.on('end', () =>
          response.statusCode === 200
            ? resolve(text)
            : reject(new Error(`clickhouse ${response.statusCode}: ${text.slice(0, 300)}`)),
        );
        response.on('error', reject);
      },
    );
    call.on('error', reject);
    if (body) pipeline(body, call).catch(reject);
    else call.end();
  });
}

export const floorTableColumns =
  'id Int64, account Int32, amount Nullable(Decimal(12, 2)), note Nullable(String), created String';

export async function copyToClickHouse(
  source: TestDatabase,
  sourceTable: string,
  config: AnalyticsConfig,
  table: string,
): Promise<void> {
  const copy = source.client.query(
    copyTo(`COPY ${sourceTable} (id, account, amount, note, created) TO STDOUT (FORMAT csv)`),
  );
  await clickhouseQuery(config, `INSERT INTO ${config.database}.${table} FORMAT CSV`, copy);
}

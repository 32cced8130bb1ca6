// PostgreSQL's own logical replication: a publication at the source and a
// subscription at the target server, whose apply worker writes the rows.
// https://www.postgresql.org/docs/15/logical-replication.html
import type { TestDatabase } from '../../test/support/databases.ts';
import { connectionString } from '../lib/servers.ts';
import { until } from '../lib/stats.ts';

export class Subscription {
  readonly #target: TestDatabase;
  readonly name: string;

  private constructor(target: TestDatabase, name: string) {
    this.#target = target;
    this.name = name;
  }

  /**
   * Creates the subscription and its slot at the source. Without `copyData` it
   * starts disabled: changes from now on wait in the slot until `enable`.
   */
  static async create(
    source: TestDatabase,
    target: TestDatabase,
    name: string,
    publication: string,
    copyData: boolean,
  ): Promise<Subscription> {
    await target.client.query(
      `CREATE SUBSCRIPTION ${name} CONNECTION '${connectionString(source)}' PUBLICATION ${publication}
       WITH (copy_data = ${copyData}, enabled = ${copyData}, create_slot = true, slot_name = '${name}')`,
    );
    return new Subscription(target, name);
  }

  async enable(): Promise<void> {
    await this.#target.client.query(`ALTER SUBSCRIPTION ${this.name} ENABLE`);
  }

  async disable(): Promise<void> {
    await this.#target.client.query(`ALTER SUBSCRIPTION ${this.name} DISABLE`);
    // Disabling returns before the apply worker exits; the next enable must not race it.
    await until(
      `${this.name}: apply worker exit`,
      async () =>
        (
          await this.#target.client.query(
            `SELECT 1 FROM pg_stat_subscription WHERE subname = $1 AND pid IS NOT NULL`,
            [this.name],
          )
        ).rowCount === 0,
      60_000,
    );
  }

  /** Every table of the subscription has finished its initial copy. */
  async tablesReady(): Promise<boolean> {
    const result = await this.#target.client.query<{ pending: number }>(
      `SELECT count(*) FILTER (WHERE r.srsubstate <> 'r')::int AS pending, count(*)::int AS total
       FROM pg_subscription_rel r JOIN pg_subscription s ON s.oid = r.srsubid WHERE s.subname = $1`,
      [this.name],
    );
    return result.rows[0]?.pending === 0;
  }

  /** Drops the subscription and its slot at the source. */
  async drop(): Promise<void> {
    await this.#target.client.query(`DROP SUBSCRIPTION IF EXISTS ${this.name}`);
  }
}

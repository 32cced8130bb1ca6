// The chart's alert rules evaluated by a real Prometheus server (Debian's,
// scripts/testenv/prometheus.sh) scraping real standalone services whose
// mirrors read a real PostgreSQL source: each rule is made to fire by what it
// watches, not by series written for it. The rules are the chart's, rendered
// with short `for` durations and low thresholds set through its values.
//
// - TributaryMirrorLagging and TributaryMirrorStalled: a destination table
//   locked while the source writes (its batch cannot finish: lag in seconds
//   grows, no batch completes); not Stalled while the mirror only idles.
// - TributarySlotInactive: the running mirror's walsender ended again and again.
// - TributarySlotInvalidationSoon: a paused mirror's safe_wal_size shrinking as
//   the source writes (a source of the test's own, with max_slot_wal_keep_size).
// - TributarySlotUnread: a mirror of a second service whose slot was never read.
// - TributaryReplicationLagGrowing (1 MiB), TributarySlotUnhealthy: that
//   mirror's retained WAL growing, then its slot dropped by hand.
// - TributaryMirrorFailed, TributaryTableErrored: a destination holding rows a
//   mirror did not write, and a CHECK constraint one table's rows break.
// - TributaryEngineRetrying, TributaryEngineStepStalled: the walsender ended,
//   the locked write past a 3 s stall bound.
// - TributaryMetricsAbsent: both services stopped.
// TributaryOperatorNoLeader (cluster mode, per namespace) is checked with
// promtool's evaluator over series as two installations' operators export them.
// TributaryEnginePodFailing and TributaryOperatorReconcileErrors need an
// operator in a cluster: test/kube/engine-pods.test.ts makes them fire in a
// real Prometheus scraping the real operator (the engine pod's OOM status is
// written there by the test, the catalog refusing connections is real).
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, randomSuffix, type TestDatabase, waitFor } from '../support/databases.ts';
import { type PrivatePostgres, startPrivatePostgres } from '../support/private-postgres.ts';
import { type AlertTuning, startPrometheus, type TestPrometheus } from '../support/prometheus.ts';
import {
  createRelationalPeers,
  createTableMirror,
  mirrorState,
  type StandaloneProcess,
  startStandalone,
} from '../support/standalone-process.ts';
import { prometheusBinaries } from '../support/testenv.ts';

const password = 'alert-rules-test-password';

/** These alerts fire as soon as their condition holds, with test-sized bounds. */
const tuned: AlertTuning = {
  TributaryMirrorLagging: { for: '0s', threshold: 2 },
  TributaryMirrorStalled: { for: '0s', threshold: 3 },
  TributarySlotInactive: { for: '0s' },
  // Any shrinking of safe_wal_size: the rate, not the bound, is what is proven.
  TributarySlotInvalidationSoon: { for: '0s', threshold: 1e12 },
  TributarySlotUnread: { for: '0s' },
  TributaryMetricsAbsent: { for: '0s' },
  TributaryMirrorFailed: { for: '0s' },
  TributaryTableErrored: { for: '0s' },
  TributaryEngineRetrying: { for: '0s' },
  TributaryEngineStepStalled: { for: '0s' },
  TributarySlotUnhealthy: { for: '0s' },
  TributaryReplicationLagGrowing: { for: '0s', threshold: 1_048_576 },
};

describe('the alert rules in a real Prometheus', () => {
  let server: PrivatePostgres;
  let source: pg.Client;
  let destination: TestDatabase;
  let watched: StandaloneProcess;
  let unwatched: StandaloneProcess;
  let prometheus: TestPrometheus | undefined;
  const suffix = randomSuffix();
  const busy = `busy-${suffix}`;
  const idle = `idle-${suffix}`;
  const unread = `unread-${suffix}`;
  const dir = mkdtempSync(join(tmpdir(), 'tributary-alerts-'));

  const firing = (alert: string, mirror?: string) => (prometheus as TestPrometheus).firing(alert, mirror);
  const waitFiring = (alert: string, mirror: string | undefined, timeoutMs?: number) =>
    (prometheus as TestPrometheus).waitFiring(alert, mirror, timeoutMs);
  const alerts = () => (prometheus as TestPrometheus).alerts();
  const query = (expression: string) => (prometheus as TestPrometheus).query(expression);

  beforeAll(async () => {
    server = await startPrivatePostgres({ settings: ['max_slot_wal_keep_size=256MB', 'wal_keep_size=0'] });
    source = await server.connect();
    destination = await createTestDatabase('alr_dst');
    // The destination holds rows of `notes` the mirror did not write (its load
    // fails the mirror) and a CHECK constraint `checked`'s rows break (that table errors).
    await destination.client.query(`CREATE TABLE notes (id int PRIMARY KEY, pad text)`);
    await destination.client.query(`INSERT INTO notes VALUES (1, 'not the mirror''s')`);
    await destination.client.query(
      `CREATE TABLE checked (id int PRIMARY KEY, pad text, CONSTRAINT short_pad CHECK (length(pad) < 3))`,
    );
    for (const table of ['busy', 'idle', 'unread', 'filler', 'notes', 'checked']) {
      await source.query(`CREATE TABLE ${table} (id int PRIMARY KEY, pad text)`);
      await source.query(`INSERT INTO ${table} SELECT g, 'v' || g FROM generate_series(1, 100) g`);
    }
    // A step without progress for 3 s is stalled (TributaryEngineStepStalled).
    const env = { TRIBUTARY_SLOT_HEALTH_SECONDS: '1', TRIBUTARY_STALL_SECONDS: '3' };
    watched = await startStandalone(join(dir, 'watched'), password, { env });
    // Its monitor reads at start, then in an hour: a mirror created after the start is never read.
    unwatched = await startStandalone(join(dir, 'unwatched'), password, {
      env: { TRIBUTARY_SLOT_HEALTH_SECONDS: '3600' },
    });
    const sourceDatabase = { config: server.config } as TestDatabase;
    for (const service of [watched, unwatched]) {
      await createRelationalPeers(service, [
        [`src-${suffix}`, sourceDatabase],
        [`dst-${suffix}`, destination],
      ]);
    }

    const target = (service: StandaloneProcess) => new URL(service.baseUrl).host;
    prometheus = await startPrometheus(dir, [target(watched), target(unwatched)], tuned);
  }, 240_000);

  afterAll(async () => {
    await prometheus?.stop();
    await watched?.stop();
    await unwatched?.stop();
    await source?.end();
    await server?.destroy();
    await destination?.drop();
  });

  it('loaded every rule of the chart, none firing over healthy mirrors', async () => {
    for (const [mirror, table] of [
      [busy, 'public.busy'],
      [idle, 'public.idle'],
    ] as const) {
      const created = await createTableMirror(watched, {
        name: mirror,
        sourcePeer: `src-${suffix}`,
        destinationPeer: `dst-${suffix}`,
        table,
      });
      expect(created.status).toBe(200);
    }
    for (const mirror of [busy, idle]) {
      await waitFor(async () => (await mirrorState(watched, mirror)) === 'STATUS_RUNNING', 90_000, mirror);
    }
    const rules = (await (await fetch(`${(prometheus as TestPrometheus).url}/api/v1/rules`)).json()) as {
      data: { groups: { rules: { name: string; health: string }[] }[] };
    };
    const loaded = rules.data.groups.flatMap((group) => group.rules);
    expect(loaded.length).toBeGreaterThanOrEqual(15);
    expect(loaded.filter((rule) => rule.health === 'err')).toEqual([]);
    // A batch of each, then idling past the Stalled bound (3 s): not stalled, not lagging.
    await source.query(`INSERT INTO busy VALUES (1000, 'first')`);
    await source.query(`INSERT INTO idle VALUES (1000, 'first')`);
    await waitFor(
      async () =>
        (await query(`tributary_mirror_seconds_since_last_batch{mirror="${idle}"} > 5`)).length > 0 &&
        (await query(`tributary_engine_lag_seconds{mirror="${idle}"}`)).length > 0,
      60_000,
      'the idle mirror idling past the bound, its lag scraped',
    );
    const now = (await alerts())
      .filter((alert) => alert.state === 'firing')
      .map((alert) => alert.labels.alertname);
    expect(now).not.toContain('TributaryMirrorStalled');
    expect(now).not.toContain('TributaryMirrorLagging');
    expect(now).not.toContain('TributarySlotInactive');
  });

  it('fires TributaryMirrorLagging and TributaryMirrorStalled for a mirror whose destination is locked', async () => {
    const locker = destination.client;
    await locker.query('BEGIN');
    try {
      await locker.query('LOCK TABLE busy IN ACCESS EXCLUSIVE MODE');
      await source.query(`INSERT INTO busy VALUES (1001, 'waits')`);
      await waitFiring('TributaryMirrorLagging', busy);
      await waitFiring('TributaryEngineStepStalled', busy);
      await waitFiring('TributaryMirrorStalled', busy, 30_000).catch(async (error) => {
        for (const metric of [
          'tributary_mirror_seconds_since_last_batch',
          'tributary_engine_replication_lag_bytes',
          'tributary_engine_lag_seconds',
        ])
          console.log(metric, JSON.stringify(await query(`${metric}{mirror="${busy}"}`)));
        throw error;
      });
      expect(await firing('TributaryMirrorStalled', idle)).toBe(false);
    } finally {
      await locker.query('ROLLBACK');
    }
    await waitFor(async () => !(await firing('TributaryMirrorLagging', busy)), 60_000, 'lagging resolved');
  });

  it('fires TributarySlotInactive while the running mirror’s walsender keeps being ended', async () => {
    const slot = (
      (await watched.call('POST', '/api/v1/mirrors/status', { flowJobName: busy })).body as {
        slotHealth: { slotName: string };
      }
    ).slotHealth.slotName;
    let ending = true;
    const ender = (async () => {
      while (ending) {
        await source.query(
          `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`,
          [slot],
        );
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    try {
      await waitFiring('TributarySlotInactive', busy);
      await waitFiring('TributaryEngineRetrying', busy);
      expect(await mirrorState(watched, busy)).toBe('STATUS_RUNNING');
    } finally {
      ending = false;
      await ender;
    }
  });

  it('fires TributarySlotInvalidationSoon as a paused mirror’s safe_wal_size shrinks', async () => {
    const paused = await watched.call('POST', '/api/v1/mirrors/state_change', {
      flowJobName: idle,
      requestedFlowState: 'STATUS_PAUSED',
    });
    expect(paused.status).toBe(200);
    await waitFor(async () => (await mirrorState(watched, idle)) === 'STATUS_PAUSED', 60_000, 'paused');
    const safeWal = async () =>
      Number((await query(`tributary_mirror_slot_safe_wal_size_bytes{mirror="${idle}"}`))[0]?.value[1]);
    await waitFor(async () => Number.isFinite(await safeWal()), 30_000, 'safe_wal_size scraped');
    const safeBefore = await safeWal();
    // About 24 MB of WAL a round (safe_wal_size moves by whole 16 MB segments).
    let next = 1_000_000;
    await waitFor(
      async () => {
        await source.query(
          `INSERT INTO filler SELECT g, repeat(md5(g::text), 8) FROM generate_series($1::int, $1::int + 79999) g`,
          [next],
        );
        next += 80_000;
        return firing('TributarySlotInvalidationSoon', idle);
      },
      120_000,
      'TributarySlotInvalidationSoon firing',
    );
    // It fires on the slot's own shrinking: the writes while paused took segments off it.
    await waitFor(async () => (await safeWal()) < safeBefore, 60_000, 'safe_wal_size shrunk by the writes');
    expect(await safeWal()).toBeGreaterThan(0);
    // The WAL it retains grows meanwhile, past the 1 MiB set for the test.
    await waitFiring('TributaryReplicationLagGrowing', idle);
  });

  it('fires TributarySlotUnhealthy once the paused mirror’s slot is dropped behind its back', async () => {
    expect(await firing('TributarySlotUnhealthy', idle)).toBe(false);
    await source.query(
      `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE $1 AND NOT active`,
      [`tributary_idle_${suffix}%`],
    );
    await waitFiring('TributarySlotUnhealthy', idle);
  });

  it('fires TributaryMirrorFailed and TributaryTableErrored for what the destination refuses', async () => {
    for (const [mirror, table] of [
      [`failing-${suffix}`, 'public.notes'],
      [`picky-${suffix}`, 'public.checked'],
    ] as const) {
      const created = await createTableMirror(watched, {
        name: mirror,
        sourcePeer: `src-${suffix}`,
        destinationPeer: `dst-${suffix}`,
        table,
      });
      expect(created.status).toBe(200);
    }
    await waitFiring('TributaryMirrorFailed', `failing-${suffix}`);
    await waitFiring('TributaryTableErrored', `picky-${suffix}`);
  });

  it('fires TributarySlotUnread for a mirror whose slot was never read', async () => {
    const created = await createTableMirror(unwatched, {
      name: unread,
      sourcePeer: `src-${suffix}`,
      destinationPeer: `dst-${suffix}`,
      table: 'public.unread',
    });
    expect(created.status).toBe(200);
    await waitFiring('TributarySlotUnread', unread);
    expect(await firing('TributarySlotUnread', busy)).toBe(false);
  });

  // Cluster mode only (operators in two namespaces, no kubelet here): the same
  // rules in promtool's evaluator, over series as two installations' operators export them.
  it('counts TributaryOperatorNoLeader per installation (promtool)', async () => {
    const leader = (namespace: string, pod: string, values: string) => ({
      series: `tributary_operator_leader{namespace="${namespace}",pod="${pod}"}`,
      values,
    });
    writeFileSync(
      join(dir, 'no-leader.test.yml'),
      JSON.stringify({
        rule_files: [join(dir, 'rules.yml')],
        evaluation_interval: '1m',
        tests: [
          {
            interval: '1m',
            input_series: [
              leader('shop', 'operator-a', '1x15'),
              leader('shop', 'operator-b', '0x15'),
              leader('billing', 'operator-a', '1x15'),
              leader('billing', 'operator-b', '0x15'),
              leader('lost', 'operator-a', '0x15'),
              leader('lost', 'operator-b', '0x15'),
            ],
            alert_rule_test: [
              {
                eval_time: '10m',
                alertname: 'TributaryOperatorNoLeader',
                exp_alerts: [
                  {
                    exp_labels: { severity: 'critical', namespace: 'lost' },
                    exp_annotations: {
                      summary: '0 operator replicas lead in namespace lost: exactly one should',
                      description: 'Check the operator pods and the Lease tributary-operator.',
                      runbook_url: 'docs/runbooks/TributaryOperatorNoLeader.md',
                    },
                  },
                ],
              },
            ],
          },
        ],
      }),
    );
    const outcome = await new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = execFile(join(prometheusBinaries, 'promtool'), [
        'test',
        'rules',
        join(dir, 'no-leader.test.yml'),
      ]);
      let output = '';
      child.stdout?.on('data', (chunk) => (output += chunk));
      child.stderr?.on('data', (chunk) => (output += chunk));
      child.on('exit', (code) => resolve({ code, output }));
    });
    expect(outcome.code, outcome.output).toBe(0);
  });

  it('fires TributaryMetricsAbsent once no Tributary process is scraped', async () => {
    expect(await firing('TributaryMetricsAbsent')).toBe(false);
    await watched.stop();
    await unwatched.stop();
    await waitFiring('TributaryMetricsAbsent', undefined, 60_000);
  });
});

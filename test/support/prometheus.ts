// A real Prometheus server (Debian's, scripts/testenv/prometheus.sh) for a
// test: the chart's alert rules, rendered with the test's `for` durations and
// thresholds through the chart's values, evaluated over what it scrapes from
// the test's own targets every second.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { byKind, renderChart } from './chart.ts';
import { waitFor } from './databases.ts';
import { freePort } from './standalone-process.ts';
import { prometheusBinaries } from './testenv.ts';

export interface PrometheusAlert {
  readonly labels: Record<string, string>;
  readonly state: 'pending' | 'firing';
}

/** Per alert: its `for` and, where it has one, its threshold (chart values `metrics.prometheusRule.alerts.<Alert>`). */
export type AlertTuning = Readonly<Record<string, { readonly for: string; readonly threshold?: number }>>;

/** The chart's PrometheusRule spec (its rule groups) with these alerts tuned. */
export async function chartRules(tuned: AlertTuning): Promise<unknown> {
  const values = Object.entries(tuned).flatMap(([alert, settings]) => [
    '--set',
    `metrics.prometheusRule.alerts.${alert}.for=${settings.for}`,
    ...(settings.threshold === undefined
      ? []
      : ['--set', `metrics.prometheusRule.alerts.${alert}.threshold=${settings.threshold}`]),
  ]);
  const [rule] = byKind(
    await renderChart(['--set', 'metrics.prometheusRule.enabled=true', ...values]),
    'PrometheusRule',
  );
  return rule?.spec;
}

export interface TestPrometheus {
  readonly url: string;
  alerts(): Promise<PrometheusAlert[]>;
  /** Whether the alert fires (for the mirror, when one is named). */
  firing(alert: string, mirror?: string): Promise<boolean>;
  waitFiring(alert: string, mirror: string | undefined, timeoutMs?: number): Promise<void>;
  /** An instant query's result. */
  query(expression: string): Promise<{ value: [number, string] }[]>;
  /** Stops the server and waits for it to exit. Safe to call twice. */
  stop(): Promise<void>;
}

/** Starts Prometheus in `dir` over `targets` (`host:port` of /metrics) with the chart's rules tuned. */
export async function startPrometheus(
  dir: string,
  targets: readonly string[],
  tuned: AlertTuning,
): Promise<TestPrometheus> {
  if (!existsSync(join(prometheusBinaries, 'prometheus')))
    throw new Error('Prometheus is not installed: run scripts/testenv/prometheus.sh up');
  writeFileSync(join(dir, 'rules.yml'), JSON.stringify(await chartRules(tuned)));
  writeFileSync(
    join(dir, 'prometheus.yml'),
    JSON.stringify({
      global: { scrape_interval: '1s', evaluation_interval: '1s' },
      rule_files: [join(dir, 'rules.yml')],
      scrape_configs: [{ job_name: 'tributary', static_configs: [{ targets }] }],
    }),
  );
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child: ChildProcess = spawn(
    join(prometheusBinaries, 'prometheus'),
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'tsdb')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  };
  try {
    await waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`prometheus exited with ${child.exitCode}`);
        return (await fetch(`${url}/-/ready`).catch(() => undefined))?.ok === true;
      },
      60_000,
      'prometheus ready',
    );
  } catch (error) {
    await stop();
    throw error;
  }
  const alerts = async (): Promise<PrometheusAlert[]> => {
    const response = await fetch(`${url}/api/v1/alerts`);
    return ((await response.json()) as { data: { alerts: PrometheusAlert[] } }).data.alerts;
  };
  const firing = async (alert: string, mirror?: string) =>
    (await alerts()).some(
      (candidate) =>
        candidate.state === 'firing' &&
        candidate.labels.alertname === alert &&
        (mirror === undefined || candidate.labels.mirror === mirror),
    );
  return {
    url,
    alerts,
    firing,
    waitFiring: (alert, mirror, timeoutMs = 90_000) =>
      waitFor(() => firing(alert, mirror), timeoutMs, `${alert}${mirror ? ` for ${mirror}` : ''} firing`),
    query: async (expression) => {
      const response = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(expression)}`);
      return ((await response.json()) as { data: { result: { value: [number, string] }[] } }).data.result;
    },
    stop,
  };
}

// The chart's Grafana dashboard and alert rules against the metrics the code
// really exports: every query parses as PromQL (Prometheus's own grammar) and
// names only metrics some registry of ours registers.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { mirrorMetricsRegistry } from '../../api-server/src/index.ts';
import { EngineMetrics } from '../../engine/src/index.ts';
import { OperatorMetrics } from '../../operator/src/index.ts';
import { byKind, chart, renderChart } from '../support/chart.ts';
import { exportedNames, parsePromql, withoutGrafanaVariables } from '../support/promql.ts';
import { repoRoot } from '../support/testenv.ts';

// The registries each component serves: the api-server's mirror gauges (their
// values are read at scrape time, so nothing is read here), an engine pod's and
// an operator's, each with its process metrics.
const exported = exportedNames([
  mirrorMetricsRegistry({} as Parameters<typeof mirrorMetricsRegistry>[0]),
  new EngineMetrics({ processMetrics: true }).registry,
  new OperatorMetrics().registry,
]);

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

type RuleGroups = { groups: { name: string; rules: Rule[] }[] };

/** The alerts of the rule file as it ships (the chart reads the same file). */
function fileRules(): Rule[] {
  const file = parse(readFileSync(join(chart, 'rules', 'tributary.rules.yaml'), 'utf8')) as RuleGroups;
  return file.groups.flatMap((group) => group.rules);
}

/** The rules of the chart's one PrometheusRule, rendered with `values`. */
async function renderedRules(values: string[]): Promise<Rule[]> {
  const rendered = byKind(
    await renderChart(['--set', 'metrics.prometheusRule.enabled=true', ...values]),
    'PrometheusRule',
  ) as unknown as { spec: RuleGroups }[];
  expect(rendered).toHaveLength(1);
  return rendered[0]?.spec.groups.flatMap((group) => group.rules) ?? [];
}

const runbooks = join(repoRoot, 'docs', 'runbooks');
const runbookSections = ['## What it means', '## How to confirm', '## What to do', '## Resyncing safely'];

function checkQuery(where: string, expression: string): string[] {
  const { errors, metrics } = parsePromql(expression);
  expect(errors, `${where}: ${expression}`).toEqual([]);
  expect(metrics.length, `${where} names no metric`).toBeGreaterThan(0);
  for (const metric of metrics) expect(exported, `${where} uses ${metric}`).toContain(metric);
  return [...metrics];
}

describe('observability assets', () => {
  it('knows the exported names (the check below would pass on an empty set otherwise)', () => {
    for (const name of [
      'tributary_mirror_phase',
      'tributary_engine_replication_lag_bytes',
      'tributary_engine_batch_sync_seconds_bucket',
      'tributary_operator_leader',
      'tributary_operator_engine_pod_problem',
      'tributary_mirror_slot_retained_wal_bytes',
      'tributary_engine_process_resident_memory_bytes',
    ]) {
      expect(exported).toContain(name);
    }
    expect(parsePromql('rate(x[5m]').errors).not.toEqual([]);
    expect(parsePromql('sum(rate(a_total{x="y"}[5m])) / on (m) b').metrics).toEqual(['a_total', 'b']);
  });

  it('has a Grafana dashboard of valid JSON whose every query parses and uses exported metrics', () => {
    const text = readFileSync(join(chart, 'dashboards', 'tributary.json'), 'utf8');
    const dashboard = JSON.parse(text) as {
      uid: string;
      panels: { title: string; type: string; targets?: { expr: string }[] }[];
      templating: { list: { name: string; query?: string | { query: string } }[] };
    };
    expect(dashboard.uid).toBe('tributary-overview');
    const used = new Set<string>();
    let queries = 0;
    for (const panel of dashboard.panels.filter((candidate) => candidate.type !== 'row')) {
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      for (const target of panel.targets ?? []) {
        for (const metric of checkQuery(panel.title, withoutGrafanaVariables(target.expr))) used.add(metric);
        queries++;
      }
    }
    // The namespace and mirror variables' label_values() name an exported metric too.
    for (const name of ['namespace', 'mirror']) {
      const variable = dashboard.templating.list.find((candidate) => candidate.name === name);
      const definition = typeof variable?.query === 'object' ? variable.query.query : '';
      expect(exported, name).toContain(/label_values\((\w+)[{,]/.exec(definition)?.[1]);
    }
    // Every mirror panel is by namespace too: two installations' mirrors of one name stay apart.
    for (const panel of dashboard.panels) {
      for (const target of panel.targets ?? []) {
        if (target.expr.includes('$mirror'))
          expect(target.expr, panel.title).toContain('namespace=~"$namespace"');
      }
    }
    expect(queries).toBeGreaterThanOrEqual(10);
    // Each component's metrics appear.
    for (const prefix of ['tributary_mirror_', 'tributary_engine_', 'tributary_operator_']) {
      expect(
        [...used].some((metric) => metric.startsWith(prefix)),
        prefix,
      ).toBe(true);
    }
  });

  it('renders the alerts of docs/observability.md as a PrometheusRule over exported metrics', async () => {
    expect(byKind(await renderChart(), 'PrometheusRule')).toEqual([]);
    const rendered = byKind(
      await renderChart([
        '--set',
        'metrics.prometheusRule.enabled=true',
        '--set',
        'metrics.prometheusRule.labels.release=prom',
      ]),
      'PrometheusRule',
    ) as unknown as {
      metadata: { labels: Record<string, string> };
      spec: { groups: { name: string; rules: Rule[] }[] };
    }[];
    expect(rendered).toHaveLength(1);
    const rule = rendered[0];
    expect(rule?.metadata.labels.release).toBe('prom');
    // Without per-alert settings the chart uses the rule file as is.
    const file = parse(readFileSync(join(chart, 'rules', 'tributary.rules.yaml'), 'utf8'));
    expect(rule?.spec).toEqual(file);
    const rules = rule?.spec.groups.flatMap((group) => group.rules) ?? [];
    expect(rules.map((candidate) => candidate.alert).sort()).toEqual([
      'TributaryEnginePodFailing',
      'TributaryEngineRetrying',
      'TributaryEngineStepStalled',
      'TributaryMetricsAbsent',
      'TributaryMirrorFailed',
      'TributaryMirrorLagging',
      'TributaryMirrorStalled',
      'TributaryOperatorNoLeader',
      'TributaryOperatorReconcileErrors',
      'TributaryReplicationLagGrowing',
      'TributarySlotInactive',
      'TributarySlotInvalidationSoon',
      'TributarySlotUnhealthy',
      'TributarySlotUnread',
      'TributaryTableErrored',
    ]);
    for (const candidate of rules) {
      checkQuery(candidate.alert, candidate.expr);
      expect(candidate.for, candidate.alert).toMatch(/^\d+[smh]$/);
      expect(['warning', 'critical']).toContain(candidate.labels?.severity);
      expect(candidate.annotations?.summary, candidate.alert).toBeTruthy();
    }
    // Each alert docs/observability.md lists is one of them, by its metric.
    const docs = readFileSync(join(chart, '..', '..', 'docs', 'observability.md'), 'utf8');
    for (const metric of [
      'tributary_mirror_phase',
      'tributary_mirror_seconds_since_last_batch',
      'tributary_engine_replication_lag_bytes',
      'tributary_engine_run_failures_total',
      'tributary_engine_stalled',
      'tributary_mirror_slot_retained_wal_bytes',
      'tributary_mirror_slot_healthy',
      'tributary_mirror_slot_last_read_timestamp_seconds',
      'tributary_mirror_table_state',
      'tributary_engine_lag_seconds',
      'tributary_mirror_slot_safe_wal_size_bytes',
      'tributary_mirror_slot_active',
      'tributary_engine_process_resident_memory_bytes',
      'tributary_operator_leader',
      'tributary_operator_reconciles_total',
    ]) {
      expect(docs).toContain(metric);
      expect(
        rules.some((candidate) => candidate.expr.includes(metric)),
        metric,
      ).toBe(true);
    }
  });

  it('gives every alert a runbook page in docs/runbooks, and keeps no page without an alert', () => {
    const rules = fileRules();
    expect(rules.length).toBeGreaterThanOrEqual(11);
    for (const { alert, annotations } of rules) {
      // The path in the repository: the file is also loaded raw, without the chart.
      expect(annotations?.runbook_url, alert).toBe(`docs/runbooks/${alert}.md`);
      const page = join(runbooks, `${alert}.md`);
      expect(existsSync(page), `${alert}: docs/runbooks/${alert}.md`).toBe(true);
      const text = readFileSync(page, 'utf8');
      expect(text.startsWith(`# ${alert}\n`), `${alert}: its title`).toBe(true);
      const headings = text.split('\n').filter((line) => line.startsWith('## '));
      expect(headings, alert).toEqual(runbookSections);
    }
    const pages = readdirSync(runbooks).sort();
    expect(pages).toEqual(rules.map((rule) => `${rule.alert}.md`).sort());
  });

  it('compares each thresholded rule against its threshold annotation once, which the chart values replace', async () => {
    const file = fileRules();
    const thresholded = file.filter((rule) => rule.annotations?.threshold !== undefined);
    expect(thresholded.map((rule) => rule.alert).sort()).toEqual([
      'TributaryMirrorLagging',
      'TributaryMirrorStalled',
      'TributaryReplicationLagGrowing',
      'TributarySlotInvalidationSoon',
      'TributarySlotUnread',
    ]);
    const comparisons = (rule: Rule, bound: string) =>
      rule.expr.split(`> ${bound}`).length + rule.expr.split(`< ${bound}`).length - 2;
    for (const rule of thresholded)
      expect(comparisons(rule, rule.annotations?.threshold ?? ''), rule.alert).toBe(1);
    const rendered = await renderedRules([
      '--set',
      'metrics.prometheusRule.alerts.TributaryMirrorLagging.threshold=30',
      '--set',
      'metrics.prometheusRule.alerts.TributaryMirrorLagging.for=2m',
      '--set',
      'metrics.prometheusRule.alerts.TributarySlotInvalidationSoon.threshold=7200',
      '--set',
      'metrics.prometheusRule.alerts.TributaryMetricsAbsent.enabled=false',
    ]);
    const lagging = rendered.find((rule) => rule.alert === 'TributaryMirrorLagging');
    expect(lagging?.expr).toBe('max by (namespace, mirror) (tributary_engine_lag_seconds) > 30');
    expect(lagging?.for).toBe('2m');
    expect(lagging?.annotations?.threshold).toBe('30');
    expect(rendered.find((rule) => rule.alert === 'TributarySlotInvalidationSoon')?.expr).toContain('< 7200');
    expect(rendered.map((rule) => rule.alert)).not.toContain('TributaryMetricsAbsent');
    expect(rendered).toHaveLength(file.length - 1);
    await expect(
      renderedRules(['--set', 'metrics.prometheusRule.alerts.TributaryMirrorFailed.threshold=1']),
    ).rejects.toMatchObject({ stderr: expect.stringContaining('the alert has no threshold') });
  });

  it('points runbook_url under metrics.prometheusRule.runbookBaseUrl when it is set', async () => {
    const file = fileRules();
    const withoutBase = await renderedRules([]);
    expect(withoutBase.map((rule) => rule.annotations?.runbook_url)).toEqual(
      file.map((rule) => `docs/runbooks/${rule.alert}.md`),
    );
    // A trailing slash or none: the same links.
    for (const base of ['https://example.test/runbooks', 'https://example.test/runbooks/']) {
      const rules = await renderedRules(['--set', `metrics.prometheusRule.runbookBaseUrl=${base}`]);
      expect(rules.map((rule) => rule.alert)).toEqual(file.map((rule) => rule.alert));
      for (const [index, rule] of rules.entries()) {
        expect(rule.annotations?.runbook_url, rule.alert).toBe(
          `https://example.test/runbooks/${rule.alert}.md`,
        );
        // Nothing else of the rule changes.
        const { runbook_url: _rendered, ...annotations } = rule.annotations ?? {};
        const { runbook_url: _file, ...fileAnnotations } = file[index]?.annotations ?? {};
        expect({ ...rule, annotations }).toEqual({ ...file[index], annotations: fileAnnotations });
      }
    }
  });

  it('puts the dashboard in a ConfigMap for the Grafana sidecar when asked', async () => {
    expect(byKind(await renderChart(), 'ConfigMap')).toEqual([]);
    const maps = byKind(
      await renderChart(['--set', 'metrics.grafanaDashboard.enabled=true']),
      'ConfigMap',
    ) as unknown as {
      metadata: { labels: Record<string, string> };
      data: Record<string, string>;
    }[];
    expect(maps).toHaveLength(1);
    expect(maps[0]?.metadata.labels.grafana_dashboard).toBe('1');
    expect(maps[0]?.data['tributary.json']).toBe(
      readFileSync(join(chart, 'dashboards', 'tributary.json'), 'utf8'),
    );
  });
});

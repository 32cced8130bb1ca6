// PromQL as Prometheus itself reads it (its own lezer grammar), for tests of
// dashboards and alert rules: syntax errors, and the metric names a query uses.
import { parser } from '@prometheus-io/lezer-promql';
import type { Registry } from 'prom-client';

/**
 * Grafana's variables are not PromQL: `[$__rate_interval]` becomes `[5m]`, a
 * `$var` or `${var}` inside a label matcher's string becomes `x`.
 */
export function withoutGrafanaVariables(expression: string): string {
  return expression.replace(/\[\$__\w+\]/g, '[5m]').replace(/\$\{?\w+\}?/g, 'x');
}

export interface ParsedQuery {
  /** Where the grammar failed, empty when the expression parses. */
  readonly errors: readonly string[];
  readonly metrics: readonly string[];
}

export function parsePromql(expression: string): ParsedQuery {
  const errors: string[] = [];
  const metrics = new Set<string>();
  parser.parse(expression).iterate({
    enter(node) {
      if (node.type.isError)
        errors.push(`at ${node.from}: ${JSON.stringify(expression.slice(node.from, node.from + 20))}`);
      // The metric name of a selector (function names are FunctionIdentifier).
      if (node.name === 'Identifier' && node.node.parent?.name === 'VectorSelector') {
        metrics.add(expression.slice(node.from, node.to));
      }
    },
  });
  return { errors, metrics: [...metrics] };
}

/** Every series name a registry exposes, histograms with their _bucket, _sum and _count. */
export function exportedNames(registries: readonly Registry[]): Set<string> {
  const names = new Set<string>();
  for (const registry of registries) {
    for (const metric of registry.getMetricsAsArray()) {
      const { name, type } = metric as unknown as { name: string; type: string };
      if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(name + suffix);
      else if (type === 'summary') for (const suffix of ['', '_sum', '_count']) names.add(name + suffix);
      else names.add(name);
    }
  }
  return names;
}

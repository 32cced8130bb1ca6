// The chart's knobs for its own pods (operator, api-server, helm test), its
// names, disruption budgets, network policies and monitors, rendered with
// `helm template` and checked object by object.
import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import type { V1Deployment, V1Pod, V1PodSpec } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { byKind, chart, type Manifest, renderChart, requiredValues } from '../support/chart.ts';
import { helmBinary } from '../support/testenv.ts';

const run = promisify(execFile);
const set = (...values: string[]) => values.flatMap((value) => ['--set', value]);

const deployment = (manifests: Manifest[], name: string) => {
  const found = byKind(manifests, 'Deployment').find((candidate) => candidate.metadata.name === name);
  if (!found) throw new Error(`no Deployment ${name}`);
  return found as unknown as V1Deployment & { spec: { template: { spec: V1PodSpec } } };
};
/** A NetworkPolicy as YAML spells it (client-node's model says `_from`). */
interface NetworkPolicy {
  metadata: { name: string };
  spec: {
    podSelector: { matchLabels: Record<string, string> };
    policyTypes: string[];
    ingress: { ports: { protocol: string; port: number }[]; from?: unknown[] }[];
    egress?: unknown[];
  };
}

const named = (manifests: Manifest[], kind: string, name: string) =>
  byKind(manifests, kind).find((candidate) => candidate.metadata.name === name);

describe('Helm chart pods', () => {
  it('schedules, labels and secures the operator and api-server pods from their values', async () => {
    const manifests = await renderChart(
      ['operator', 'api'].flatMap((role) =>
        set(
          `${role}.nodeSelector.disk=ssd`,
          `${role}.tolerations[0].key=dedicated`,
          `${role}.tolerations[0].operator=Exists`,
          `${role}.topologySpreadConstraints[0].maxSkew=1`,
          `${role}.topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone`,
          `${role}.topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway`,
          `${role}.priorityClassName=platform`,
          `${role}.podLabels.team=data`,
          `${role}.podAnnotations.owner=data`,
          `${role}.extraEnv[0].name=NODE_EXTRA_CA_CERTS`,
          `${role}.extraEnv[0].value=/etc/ca/bundle.pem`,
          `${role}.extraVolumes[0].name=ca`,
          `${role}.extraVolumes[0].configMap.name=ca-bundle`,
          `${role}.extraVolumeMounts[0].name=ca`,
          `${role}.extraVolumeMounts[0].mountPath=/etc/ca`,
          // OpenShift's restricted SCC assigns the ids itself.
          `${role}.podSecurityContext.runAsUser=null`,
          `${role}.podSecurityContext.runAsGroup=null`,
          `${role}.podSecurityContext.fsGroup=null`,
          `${role}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=zone`,
          `${role}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists`,
        ),
      ),
    );
    for (const name of ['tributary-operator', 'tributary-api-server']) {
      const template = deployment(manifests, name).spec.template;
      const pod = template.spec;
      expect(pod.nodeSelector, name).toEqual({ disk: 'ssd' });
      expect(pod.tolerations).toEqual([{ key: 'dedicated', operator: 'Exists' }]);
      expect(pod.topologySpreadConstraints?.[0]).toMatchObject({
        maxSkew: 1,
        whenUnsatisfiable: 'ScheduleAnyway',
      });
      expect(pod.priorityClassName).toBe('platform');
      // The values' affinity replaces the operator's default anti-affinity.
      expect(pod.affinity).toEqual({
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [{ matchExpressions: [{ key: 'zone', operator: 'Exists' }] }],
          },
        },
      });
      expect(template.metadata?.labels).toMatchObject({ team: 'data', 'app.kubernetes.io/name': name });
      expect(template.metadata?.annotations).toEqual({ owner: 'data' });
      expect(pod.securityContext).toEqual({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
      const [container] = pod.containers;
      expect(container?.securityContext).toMatchObject({
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
      });
      expect(container?.env).toContainEqual({ name: 'NODE_EXTRA_CA_CERTS', value: '/etc/ca/bundle.pem' });
      expect(container?.volumeMounts).toContainEqual({ name: 'ca', mountPath: '/etc/ca' });
      expect(pod.volumes).toContainEqual({ name: 'ca', configMap: { name: 'ca-bundle' } });
      // The chart's own mounts stay.
      expect(container?.volumeMounts?.length).toBeGreaterThan(1);
    }
  });

  it('keeps the selector labels when podLabels name them', async () => {
    const manifests = await renderChart(set('operator.podLabels.app\\.kubernetes\\.io/name=other'));
    const operator = deployment(manifests, 'tributary-operator');
    expect(operator.spec.template.metadata?.labels).toMatchObject(operator.spec.selector.matchLabels ?? {});
  });

  it('spreads the two operators over nodes, softly by default, and budgets their disruption', async () => {
    const antiAffinity = async (...values: string[]) =>
      deployment(await renderChart(set(...values)), 'tributary-operator').spec.template.spec.affinity
        ?.podAntiAffinity;
    const selector = {
      matchLabels: {
        'app.kubernetes.io/name': 'tributary-operator',
        'app.kubernetes.io/instance': 'tributary',
      },
    };
    expect(await antiAffinity()).toEqual({
      preferredDuringSchedulingIgnoredDuringExecution: [
        { weight: 100, podAffinityTerm: { topologyKey: 'kubernetes.io/hostname', labelSelector: selector } },
      ],
    });
    expect(await antiAffinity('operator.podAntiAffinity=hard')).toEqual({
      requiredDuringSchedulingIgnoredDuringExecution: [
        { topologyKey: 'kubernetes.io/hostname', labelSelector: selector },
      ],
    });
    expect(await antiAffinity('operator.podAntiAffinity=')).toBeUndefined();

    expect(byKind(await renderChart(), 'PodDisruptionBudget')).toEqual([]);
    const budgeted = await renderChart(set('podDisruptionBudget.enabled=true'));
    const budgets = byKind(budgeted, 'PodDisruptionBudget') as unknown as {
      metadata: { name: string };
      spec: { maxUnavailable: number; selector: { matchLabels: Record<string, string> } };
    }[];
    // One api-server replica: a budget would block every drain of its node.
    expect(budgets.map((budget) => budget.metadata.name)).toEqual(['tributary-operator']);
    expect(budgets[0]?.spec.maxUnavailable).toBe(1);
    expect(deployment(budgeted, 'tributary-operator').spec.template.metadata?.labels).toMatchObject(
      budgets[0]?.spec.selector.matchLabels ?? {},
    );
    const twoApis = await renderChart(set('podDisruptionBudget.enabled=true', 'api.replicas=2'));
    expect(
      byKind(twoApis, 'PodDisruptionBudget')
        .map((budget) => budget.metadata.name)
        .sort(),
    ).toEqual(['tributary-api-server', 'tributary-operator']);
  });

  it('names every object from fullnameOverride (or nameOverride), consistently', async () => {
    const defaults = await renderChart();
    const manifests = await renderChart(
      set('fullnameOverride=cdc', 'metrics.podMonitor.enabled=true', 'metrics.serviceMonitor.enabled=true'),
    );
    expect(deployment(manifests, 'cdc-operator')).toBeDefined();
    const api = deployment(manifests, 'cdc-api-server');
    expect(named(manifests, 'Service', 'cdc-api')).toMatchObject({
      spec: { selector: api.spec.template.metadata?.labels },
    });
    const accounts = byKind(manifests, 'ServiceAccount')
      .map((account) => account.metadata.name)
      .sort();
    expect(accounts).toEqual(['cdc-api-server', 'cdc-engine', 'cdc-operator']);
    // The operator gives engine pods the engine account the chart created.
    expect(deployment(manifests, 'cdc-operator').spec.template.spec.containers[0]?.env).toContainEqual({
      name: 'TRIBUTARY_ENGINE_SERVICE_ACCOUNT',
      value: 'cdc-engine',
    });
    for (const binding of byKind(manifests, 'RoleBinding') as unknown as {
      metadata: { name: string };
      roleRef: { name: string };
      subjects: { name: string }[];
    }[]) {
      expect(binding.roleRef.name).toBe(binding.metadata.name);
      expect(accounts).toContain(binding.subjects[0]?.name);
    }
    const operatorMonitor = named(manifests, 'PodMonitor', 'cdc-operator') as unknown as {
      spec: { selector: { matchLabels: Record<string, string> } };
    };
    expect(deployment(manifests, 'cdc-operator').spec.template.metadata?.labels).toMatchObject(
      operatorMonitor.spec.selector.matchLabels,
    );
    // Nothing keeps the default prefix but what the operator itself names (engine pod labels, the id counter).
    const defaultNames = (list: Manifest[]) =>
      list.map((manifest) => `${manifest.kind}/${manifest.metadata.name}`);
    expect(defaultNames(manifests).filter((name) => name.includes('tributary'))).toEqual(
      defaultNames(manifests).filter((name) => name.startsWith('Secret/tributary-')),
    );
    expect(
      deployment(await renderChart(set('nameOverride=replication')), 'replication-operator'),
    ).toBeDefined();
    // Without either, the names are the ones earlier releases used.
    expect(defaultNames(defaults)).toEqual(
      expect.arrayContaining([
        'Deployment/tributary-operator',
        'Deployment/tributary-api-server',
        'Service/tributary-api',
        'ServiceAccount/tributary-engine',
      ]),
    );
  });

  it('lets only the API port and the metrics ports in when networkPolicy is enabled', async () => {
    expect(byKind(await renderChart(), 'NetworkPolicy')).toEqual([]);
    const manifests = await renderChart(
      set(
        'networkPolicy.enabled=true',
        'networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.name=monitoring',
        'networkPolicy.engineEgress[0].to[0].ipBlock.cidr=10.0.0.0/8',
      ),
    );
    const policies = byKind(manifests, 'NetworkPolicy') as unknown as NetworkPolicy[];
    const policy = (name: string) => policies.find((candidate) => candidate.metadata.name === name);
    for (const name of ['tributary-api-server', 'tributary-operator']) {
      const pod = deployment(manifests, name).spec.template;
      const selected = policy(name);
      expect(pod.metadata?.labels).toMatchObject(
        selected?.spec.podSelector.matchLabels ?? { none: 'selected' },
      );
      const ports = pod.spec.containers
        .flatMap((container) => container.ports ?? [])
        .map((port) => port.containerPort);
      expect(selected?.spec.ingress?.[0]?.ports?.map((port) => port.port)).toEqual(ports);
    }
    expect(policy('tributary-api-server')?.spec.ingress?.[0]?.from).toBeUndefined();
    expect(policy('tributary-operator')?.spec.ingress?.[0]?.from).toEqual([
      { namespaceSelector: { matchLabels: { name: 'monitoring' } } },
    ]);
    const engines = policy('tributary-engines')?.spec;
    // The labels the operator gives engine pods (statefulset-runtime.ts), as the PodMonitor selects them.
    expect(engines?.podSelector.matchLabels).toEqual({
      'app.kubernetes.io/name': 'tributary-engine',
      'app.kubernetes.io/managed-by': 'tributary',
    });
    expect(engines?.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(engines?.egress).toEqual([
      {
        ports: [
          { protocol: 'UDP', port: 53 },
          { protocol: 'TCP', port: 53 },
        ],
      },
      { to: [{ ipBlock: { cidr: '10.0.0.0/8' } }] },
    ]);
    const open = await renderChart(set('networkPolicy.enabled=true'));
    const openEngines = (byKind(open, 'NetworkPolicy') as unknown as NetworkPolicy[]).find(
      (candidate) => candidate.metadata.name === 'tributary-engines',
    );
    expect(openEngines?.spec.policyTypes).toEqual(['Ingress']);
  });

  it('labels the ServiceMonitor and PodMonitors for a Prometheus that selects on release', async () => {
    const manifests = await renderChart(
      set(
        'metrics.serviceMonitor.enabled=true',
        'metrics.serviceMonitor.labels.release=prometheus',
        'metrics.podMonitor.enabled=true',
        'metrics.podMonitor.labels.release=prometheus',
      ),
    );
    const monitors = [
      ...byKind(manifests, 'ServiceMonitor'),
      ...byKind(manifests, 'PodMonitor'),
    ] as unknown as {
      metadata: { labels: Record<string, string> };
    }[];
    expect(monitors).toHaveLength(3);
    for (const monitor of monitors)
      expect(monitor.metadata.labels).toMatchObject({
        release: 'prometheus',
        'app.kubernetes.io/part-of': 'tributary',
      });
  });

  it('asks for credentials on /metrics with api.metricsAuth, and the ServiceMonitor sends the API Secret’s', async () => {
    const manifests = await renderChart(set('metrics.serviceMonitor.enabled=true', 'api.metricsAuth=true'));
    const [monitor] = byKind(manifests, 'ServiceMonitor') as unknown as {
      spec: { endpoints: { basicAuth?: Record<string, { name: string; key: string }> }[] };
    }[];
    const secretName = (
      byKind(manifests, 'Secret') as unknown as {
        metadata: { name: string };
        stringData?: Record<string, string>;
      }[]
    ).find((secret) => secret.stringData?.password !== undefined);
    expect(monitor?.spec.endpoints[0]?.basicAuth).toEqual({
      username: { name: secretName?.metadata.name, key: 'username' },
      password: { name: secretName?.metadata.name, key: 'password' },
    });
    expect(secretName?.stringData?.username).toBe('');
    const deployments = byKind(manifests, 'Deployment') as unknown as {
      metadata: { name: string };
      spec: { template: { spec: { containers: { env?: { name: string; value?: string }[] }[] } } };
    }[];
    const apiEnv = deployments
      .flatMap((deployment) => deployment.spec.template.spec.containers)
      .flatMap((container) => container.env ?? []);
    expect(apiEnv).toContainEqual({ name: 'TRIBUTARY_METRICS_AUTH', value: 'true' });
    // Off by default: nothing asked, nothing sent.
    const plain = await renderChart(set('metrics.serviceMonitor.enabled=true'));
    const [plainMonitor] = byKind(plain, 'ServiceMonitor') as unknown as {
      spec: { endpoints: { basicAuth?: unknown }[] };
    }[];
    expect(plainMonitor?.spec.endpoints[0]?.basicAuth).toBeUndefined();
  });

  it('needs Kubernetes 1.25 (the CRDs’ CEL rules)', async () => {
    const template = (version: string) =>
      run(helmBinary, ['template', 'x', chart, ...requiredValues, '--kube-version', version]);
    await expect(template('1.24.9')).rejects.toThrow(/kubeVersion: >=1.25.0-0/);
    await expect(template('1.25.0')).resolves.toBeDefined();
  });

  it('refuses wrong values of the new knobs', async () => {
    const template = (...values: string[]) =>
      run(helmBinary, ['template', 'x', chart, ...requiredValues, ...set(...values)]);
    await expect(template('operator.podAntiAffinity=sometimes')).rejects.toThrow(/operator\/podAntiAffinity/);
    await expect(template('fullnameOverride=Not_A_Name')).rejects.toThrow(/fullnameOverride/);
    await expect(template('api.extraEnv[0].value=x')).rejects.toThrow(/api\/extraEnv\/0.*name/);
    await expect(template('operator.extraVolumeMounts[0].name=ca')).rejects.toThrow(/mountPath/);
    await expect(template('podDisruptionBudget.enabled=yes')).rejects.toThrow(/podDisruptionBudget\/enabled/);
    await expect(template('networkPolicy.enable=true')).rejects.toThrow(/additional properties 'enable'/);
  });

  describe('helm test', () => {
    const testPod = async (...values: string[]) => {
      const pod = byKind(await renderChart(set(...values)), 'Pod')[0] as unknown as V1Pod | undefined;
      if (!pod?.spec) throw new Error('no test pod');
      return pod as V1Pod & { spec: V1PodSpec };
    };

    it('is a hook pod of the project image that calls the API Service /healthz', async () => {
      const pod = await testPod();
      expect(pod.metadata?.annotations).toMatchObject({ 'helm.sh/hook': 'test' });
      const [container] = pod.spec.containers;
      expect(container?.image).toBe('ghcr.io/tributary/tributary:0.1.0');
      expect(container?.env).toContainEqual({
        name: 'HEALTHZ_URL',
        value: 'http://tributary-api.tributary.svc:8112/healthz',
      });
      expect(pod.spec.securityContext).toMatchObject({ runAsNonRoot: true });
      expect(container?.securityContext).toMatchObject({ readOnlyRootFilesystem: true });
      const tls = await testPod('api.tls.existingSecret=api-cert');
      expect(tls.spec.containers[0]?.env).toEqual(
        expect.arrayContaining([
          { name: 'HEALTHZ_URL', value: 'https://tributary-api.tributary.svc:8112/healthz' },
          { name: 'NODE_EXTRA_CA_CERTS', value: '/etc/tributary-tls/ca.crt' },
        ]),
      );
    });

    it('passes on a 200 and fails on anything else', async () => {
      const pod = await testPod();
      const [command = '', ...args] = [
        ...(pod.spec.containers[0]?.command ?? []),
        ...(pod.spec.containers[0]?.args ?? []),
      ];
      expect(command).toBe('node');
      let status = 200;
      const server = createServer((request, response) => {
        response.statusCode = request.url === '/healthz' ? status : 404;
        response.end();
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/healthz`;
      const probe = () => run(process.execPath, args, { env: { ...process.env, HEALTHZ_URL: url } });
      try {
        await expect(probe()).resolves.toMatchObject({ stdout: `${url} 200\n` });
        status = 503;
        await expect(probe()).rejects.toMatchObject({ code: 1 });
      } finally {
        server.close();
      }
    });
  });
});

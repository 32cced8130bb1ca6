// The Helm chart: lint, render, and check the rendered manifests field by field.
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { V1PodSpec } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { enginePodDefaultsSchema } from '../../engine/src/index.ts';
import { byKind, chart, kubeVersion, type Manifest, renderChart, requiredValues } from '../support/chart.ts';
import { readableByContainer, secretFiles } from '../support/pod-files.ts';
import { helmBinary, repoRoot } from '../support/testenv.ts';

const run = promisify(execFile);

describe('Helm chart', () => {
  it('passes helm lint', async () => {
    const { stdout } = await run(helmBinary, ['lint', chart, ...requiredValues]);
    expect(stdout).toContain('0 chart(s) failed');
  });

  it('ships the same CRDs as crds/', () => {
    for (const file of readdirSync(join(repoRoot, 'crds'))) {
      expect(readFileSync(join(chart, 'crds', file), 'utf8')).toBe(
        readFileSync(join(repoRoot, 'crds', file), 'utf8'),
      );
    }
  });

  it('refuses to render without an API password or a catalog', async () => {
    await expect(
      run(helmBinary, ['template', 'x', chart, ...kubeVersion, '--set', 'catalog.url=postgres://db/c']),
    ).rejects.toThrow(/no default password/);
    await expect(
      run(helmBinary, ['template', 'x', chart, ...kubeVersion, '--set', 'api.password=long-enough-password']),
    ).rejects.toThrow(/catalog/);
    await expect(
      run(helmBinary, [
        'template',
        'x',
        chart,
        ...kubeVersion,
        '--set',
        'catalog.url=postgres://db/c',
        '--set',
        'api.password=CHANGE-ME',
      ]),
    ).rejects.toThrow(/api.password is shorter than 16 characters/);
  });

  it('serves the API over HTTPS from a TLS Secret when given one, probes and scrapes included', async () => {
    const apiServer = (manifests: Manifest[]) =>
      byKind(manifests, 'Deployment').find(
        (deployment) => deployment.metadata.name === 'tributary-api-server',
      ) as unknown as { spec: { template: { spec: V1PodSpec } } };
    const plain = apiServer(await renderChart()).spec.template.spec;
    expect(plain.containers[0]?.readinessProbe?.httpGet?.scheme).toBe('HTTP');
    expect(JSON.stringify(plain)).not.toContain('TRIBUTARY_TLS');

    const manifests = await renderChart([
      '--set',
      'api.tls.existingSecret=api-cert',
      '--set',
      'api.trustProxy=10.0.0.0/8',
      '--set',
      'metrics.serviceMonitor.enabled=true',
    ]);
    const pod = apiServer(manifests).spec.template.spec;
    const container = pod.containers[0];
    expect(container?.env).toEqual(
      expect.arrayContaining([
        { name: 'TRIBUTARY_TLS_CERT_FILE', value: '/etc/tributary-tls/tls.crt' },
        { name: 'TRIBUTARY_TLS_KEY_FILE', value: '/etc/tributary-tls/tls.key' },
        { name: 'TRIBUTARY_TRUST_PROXY', value: '10.0.0.0/8' },
      ]),
    );
    expect(container?.readinessProbe?.httpGet?.scheme).toBe('HTTPS');
    expect(container?.livenessProbe?.httpGet?.scheme).toBe('HTTPS');
    // The same mode as the API password's volume (the parser reads the chart's 0440 as YAML 1.2 does).
    const passwordMode = pod.volumes?.find((volume) => volume.name === 'api-password')?.secret?.defaultMode;
    expect(pod.volumes).toContainEqual({
      name: 'api-tls',
      secret: { secretName: 'api-cert', defaultMode: passwordMode },
    });
    // The key is readable by the pod user, as the password is.
    const key = secretFiles(pod, container as NonNullable<typeof container>, ['tls.key']).find(
      (file) => file.path === '/etc/tributary-tls/tls.key',
    );
    expect(key && readableByContainer(pod, container as NonNullable<typeof container>, key)).toBe(true);
    const [monitor] = byKind(manifests, 'ServiceMonitor') as unknown as {
      spec: { endpoints: Record<string, unknown>[] };
    }[];
    expect(monitor?.spec.endpoints[0]).toMatchObject({
      scheme: 'https',
      tlsConfig: { ca: { secret: { name: 'api-cert', key: 'ca.crt' } } },
    });
  });

  it('mounts the API credentials Secret as the file the api-server reads, readable by it and nobody else', async () => {
    const apiServer = (manifests: Manifest[]) =>
      (
        byKind(manifests, 'Deployment').find(
          (deployment) => deployment.metadata.name === 'tributary-api-server',
        ) as unknown as { spec: { template: { spec: V1PodSpec } } }
      ).spec.template.spec;
    expect(JSON.stringify(apiServer(await renderChart()))).not.toContain('CREDENTIALS');

    // Parsed as Kubernetes reads it, YAML 1.1, where the chart's 0440 is octal.
    const { stdout } = await run(helmBinary, [
      'template',
      'tributary',
      chart,
      '--namespace',
      'tributary',
      ...requiredValues,
      '--set',
      'api.credentials.existingSecret=api-credentials',
    ]);
    const rendered = parseAllDocuments(stdout, { version: '1.1' })
      .map((document) => document.toJS() as Manifest | null)
      .filter((manifest): manifest is Manifest => manifest !== null);
    const pod = apiServer(rendered);
    const container = pod.containers[0] as NonNullable<(typeof pod.containers)[0]>;
    expect(container.env).toContainEqual({
      name: 'TRIBUTARY_API_CREDENTIALS_FILE',
      value: '/etc/tributary-api-credentials/credentials',
    });
    expect(pod.volumes).toContainEqual({
      name: 'api-credentials',
      secret: {
        secretName: 'api-credentials',
        defaultMode: 0o440,
        items: [{ key: 'credentials', path: 'credentials' }],
      },
    });
    const file = secretFiles(pod, container, ['credentials']).find(
      (candidate) => candidate.path === '/etc/tributary-api-credentials/credentials',
    );
    expect(file && readableByContainer(pod, container, file)).toBe(true);
    // The api-server refuses a credentials file others may read or anyone but its owner may change.
    expect(file && file.mode & 0o037).toBe(0);
  });

  it('renders least-privilege accounts, hardened pods and leader-elected operators', async () => {
    const manifests = await renderChart();
    const accounts = byKind(manifests, 'ServiceAccount')
      .map((account) => account.metadata.name)
      .sort();
    expect(accounts).toEqual(['tributary-api-server', 'tributary-engine', 'tributary-operator']);
    const engine = byKind(manifests, 'ServiceAccount').find(
      (account) => account.metadata.name === 'tributary-engine',
    );
    expect(engine?.automountServiceAccountToken).toBe(false);
    const bindings = byKind(manifests, 'RoleBinding');
    expect(JSON.stringify(bindings)).not.toContain('tributary-engine');
    expect(byKind(manifests, 'ClusterRole')).toEqual([]);

    for (const deployment of byKind(manifests, 'Deployment')) {
      const pod = (deployment.spec as { template: { spec: Record<string, unknown> } }).template.spec as {
        securityContext: Record<string, unknown>;
        containers: {
          securityContext: Record<string, unknown>;
          resources: { requests: Record<string, string> };
        }[];
      };
      expect(pod.securityContext).toMatchObject({ runAsNonRoot: true });
      for (const container of pod.containers) {
        expect(container.securityContext).toMatchObject({
          readOnlyRootFilesystem: true,
          allowPrivilegeEscalation: false,
        });
        expect(container.resources.requests.memory).toBeDefined();
      }
    }
    const operator = byKind(manifests, 'Deployment').find(
      (deployment) => deployment.metadata.name === 'tributary-operator',
    );
    expect((operator?.spec as { replicas: number } | undefined)?.replicas).toBe(2);
    expect(byKind(manifests, 'Service').map((service) => service.metadata.name)).toEqual(['tributary-api']);
    expect(byKind(manifests, 'ServiceMonitor')).toEqual([]);
    const monitored = await renderChart(['--set', 'metrics.serviceMonitor.enabled=true']);
    expect(byKind(monitored, 'ServiceMonitor')).toHaveLength(1);
    expect(byKind(monitored, 'PodMonitor')).toEqual([]);
    const podMonitored = await renderChart(['--set', 'metrics.podMonitor.enabled=true']);
    const podMonitors = byKind(podMonitored, 'PodMonitor') as unknown as {
      metadata: { name: string };
      spec: { selector: { matchLabels: Record<string, string> }; podMetricsEndpoints: { port: string }[] };
    }[];
    expect(podMonitors.map((monitor) => monitor.metadata.name)).toEqual([
      'tributary-engines',
      'tributary-operator',
    ]);
    // The labels and port name the operator gives engine pods (statefulset-runtime.ts).
    expect(podMonitors[0]?.spec.selector.matchLabels).toEqual({
      'app.kubernetes.io/name': 'tributary-engine',
      'app.kubernetes.io/managed-by': 'tributary',
    });
    // The operator's: its Deployment's pod labels and the port it serves metrics on.
    const operatorDeployment = byKind(podMonitored, 'Deployment').find(
      (deployment) => deployment.metadata.name === 'tributary-operator',
    ) as unknown as {
      spec: {
        template: {
          metadata: { labels: Record<string, string> };
          spec: { containers: { args: string[]; ports: { name: string; containerPort: number }[] }[] };
        };
      };
    };
    const operatorPod = operatorDeployment.spec.template;
    expect(operatorPod.metadata.labels).toMatchObject(podMonitors[1]?.spec.selector.matchLabels ?? {});
    const container = operatorPod.spec.containers[0];
    const port = container?.ports.find((candidate) => candidate.name === 'metrics');
    expect(container?.args.slice(-2)).toEqual(['--metrics-port', String(port?.containerPort)]);
    for (const monitor of podMonitors) expect(monitor.spec.podMetricsEndpoints[0]?.port).toBe('metrics');
  });

  it('mounts every Secret readable by the pod user, as a kubelet writes it', async () => {
    const manifests = await renderChart();
    const deployments = byKind(manifests, 'Deployment') as unknown as {
      metadata: { name: string };
      spec: { template: { spec: V1PodSpec } };
    }[];
    let checked = 0;
    for (const deployment of deployments) {
      const pod = deployment.spec.template.spec;
      expect(pod.securityContext).toMatchObject({ runAsUser: 1000, fsGroup: 1000 });
      for (const container of pod.containers) {
        for (const file of secretFiles(pod, container, ['password'])) {
          expect(file.mode & 0o040, `${deployment.metadata.name} ${file.path}`).not.toBe(0);
          expect(readableByContainer(pod, container, file), `${deployment.metadata.name} ${file.path}`).toBe(
            true,
          );
          checked++;
        }
      }
    }
    expect(checked).toBeGreaterThan(0);
    // The same check fails on the pod spec the chart had before: root:root 0400.
    const api = deployments.find((deployment) => deployment.metadata.name === 'tributary-api-server');
    const container = api?.spec.template.spec.containers[0];
    if (!api || !container) throw new Error('no api-server Deployment');
    const { fsGroup: _dropped, ...withoutFsGroup } = api.spec.template.spec.securityContext ?? {};
    const before: V1PodSpec = {
      ...api.spec.template.spec,
      securityContext: withoutFsGroup,
      volumes: [{ name: 'api-password', secret: { secretName: 'x', defaultMode: 0o400 } }],
    };
    const [file] = secretFiles(before, container, ['password']);
    expect(file && readableByContainer(before, container, file)).toBe(false);
  });

  it('passes the engine values to the operator as engine pod defaults it accepts', async () => {
    const operatorEnv = (manifests: Manifest[]) => {
      const operator = byKind(manifests, 'Deployment').find(
        (deployment) => deployment.metadata.name === 'tributary-operator',
      ) as unknown as {
        spec: { template: { spec: { containers: { env: { name: string; value?: string }[] }[] } } };
      };
      const value = operator.spec.template.spec.containers[0]?.env.find(
        (variable) => variable.name === 'TRIBUTARY_ENGINE_POD',
      )?.value;
      // The operator parses it with this schema and exits naming the field when it fails.
      return enginePodDefaultsSchema.parse(JSON.parse(value ?? 'null'));
    };
    const values = parse(readFileSync(join(chart, 'values.yaml'), 'utf8')) as {
      engine: { resources: unknown; temporaryStorage: unknown };
    };
    expect(operatorEnv(await renderChart())).toEqual({
      resources: values.engine.resources,
      temporaryStorage: values.engine.temporaryStorage,
    });
    const custom = operatorEnv(
      await renderChart([
        '--set',
        'engine.resources.limits.cpu=2',
        '--set',
        'engine.nodeSelector.disk=ssd',
        '--set',
        'engine.tolerations[0].key=dedicated',
        '--set',
        'engine.tolerations[0].operator=Exists',
        '--set',
        'engine.priorityClassName=replication',
        '--set',
        'engine.podLabels.team=data',
        '--set',
        'engine.podAnnotations.owner=data',
        '--set',
        'engine.temporaryStorage.medium=Memory',
        '--set',
        'engine.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=zone',
        '--set',
        'image.pullSecrets[0].name=regcred',
      ]),
    );
    expect(custom).toMatchObject({
      resources: { limits: { cpu: '2', memory: '1Gi' } },
      nodeSelector: { disk: 'ssd' },
      tolerations: [{ key: 'dedicated', operator: 'Exists' }],
      priorityClassName: 'replication',
      labels: { team: 'data' },
      annotations: { owner: 'data' },
      imagePullSecrets: [{ name: 'regcred' }],
      temporaryStorage: { sizeLimit: '1Gi', medium: 'Memory' },
    });
    expect(JSON.stringify(custom.affinity)).toContain('"key":"zone"');
  });

  it('probes the operator on its metrics port: /healthz for liveness, /readyz for readiness', async () => {
    const operator = byKind(await renderChart(), 'Deployment').find(
      (deployment) => deployment.metadata.name === 'tributary-operator',
    ) as unknown as {
      spec: { template: { spec: { containers: { livenessProbe: unknown; readinessProbe: unknown }[] } } };
    };
    const container = operator.spec.template.spec.containers[0];
    expect(container?.livenessProbe).toMatchObject({ httpGet: { path: '/healthz', port: 'metrics' } });
    expect(container?.readinessProbe).toMatchObject({ httpGet: { path: '/readyz', port: 'metrics' } });
  });

  it('refuses wrong values with a message naming them (values.schema.json)', async () => {
    const template = (...set: string[]) =>
      run(helmBinary, [
        'template',
        'x',
        chart,
        ...requiredValues,
        ...set.flatMap((value) => ['--set', value]),
      ]);
    await expect(template('operator.replicas=two')).rejects.toThrow(/operator\/replicas.*want integer/);
    await expect(template('engine.resource.limits.cpu=1')).rejects.toThrow(
      /additional properties 'resource'/,
    );
    await expect(template('image.pullPolicy=Sometimes')).rejects.toThrow(/image\/pullPolicy/);
    await expect(template('engine.resources.limits.memory=lots')).rejects.toThrow(
      /engine\/resources\/limits\/memory/,
    );
    await expect(template('engine.tolerations[0].effect=Never')).rejects.toThrow(/tolerations\/0\/effect/);
    // helm lint reports on standard output.
    await expect(
      run(helmBinary, ['lint', chart, ...requiredValues, '--set', 'api.service.port=http']),
    ).rejects.toMatchObject({
      stdout: expect.stringMatching(/api\/service\/port': got string, want integer/),
    });
    // Every value the chart ships is valid.
    await expect(template()).resolves.toBeDefined();
  });

  it('mounts the notification webhook URL from an existing Secret as the operator reads it', async () => {
    const operatorOf = (manifests: Manifest[]) => {
      const deployment = byKind(manifests, 'Deployment').find(
        (candidate) => candidate.metadata.name === 'tributary-operator',
      ) as unknown as { spec: { template: { spec: V1PodSpec } } };
      const pod = deployment.spec.template.spec;
      const container = pod.containers[0];
      if (!container) throw new Error('no operator container');
      const env = Object.fromEntries((container.env ?? []).map((entry) => [entry.name, entry.value]));
      return { pod, container, env };
    };
    const none = operatorOf(await renderChart());
    expect(none.env.TRIBUTARY_NOTIFY_URL_FILE).toBeUndefined();
    expect(none.pod.volumes?.some((volume) => volume.name === 'notify-webhook')).toBe(false);
    const { pod, container, env } = operatorOf(
      await renderChart([
        '--set',
        'notifications.webhook.existingSecret=team-webhook',
        '--set',
        'notifications.webhook.key=slack-url',
        '--set',
        'notifications.webhook.format=slack',
      ]),
    );
    expect(env).toMatchObject({
      TRIBUTARY_NOTIFY_URL_FILE: '/etc/tributary/notify/url',
      TRIBUTARY_NOTIFY_FORMAT: 'slack',
      TRIBUTARY_NOTIFY_CHECK_SECONDS: '10',
    });
    expect(pod.volumes?.find((volume) => volume.name === 'notify-webhook')?.secret).toMatchObject({
      secretName: 'team-webhook',
      items: [{ key: 'slack-url', path: 'url' }],
    });
    const file = secretFiles(pod, container, ['url']).find((entry) => entry.path.includes('/notify/'));
    expect(file?.path).toBe('/etc/tributary/notify/url');
    expect(file && readableByContainer(pod, container, file)).toBe(true);
  });

  it('uses existing Secrets instead of creating them when told to', async () => {
    const manifests = await renderChart([
      '--set',
      'catalog.existingSecret=my-catalog',
      '--set',
      'api.existingSecret=my-api',
    ]);
    expect(byKind(manifests, 'Secret')).toEqual([]);
    expect(JSON.stringify(manifests)).toContain('my-catalog');
  });
});

describe('Argo CD health check', () => {
  it('is the same script in the ConfigMap patch and in its own file', () => {
    const lua = readFileSync(join(repoRoot, 'examples', 'argocd', 'health-mirror.lua'), 'utf8');
    const patch = parseAllDocuments(
      readFileSync(join(repoRoot, 'examples', 'argocd', 'argocd-cm-patch.yaml'), 'utf8'),
    )[0]?.toJS() as {
      data: Record<string, string>;
    };
    expect(patch.data['resource.customizations.health.tributary.dev_Mirror']?.trim()).toBe(lua.trim());
  });
});

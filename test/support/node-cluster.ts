// The real single-node cluster of scripts/testenv/node.sh, for test/cluster/:
// where it is (.testenv/node/node.json), kubectl and helm against it, and the
// host-side view of a pod's container (its process, to kill -9 it).
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { helmBinary, kube, testenvDir } from './testenv.ts';

const run = promisify(execFile);

export interface NodeFacts {
  readonly kubeconfig: string;
  readonly server: string;
  readonly nodeName: string;
  /** The bridge's address: pods reach the loopback test services on it. */
  readonly gateway: string;
  readonly podCidr: string;
  readonly containerdSocket: string;
  /** The project's image as imported into the node's containerd. */
  readonly image: string;
}

export function nodeFacts(): NodeFacts {
  const file = join(testenvDir, 'node', 'node.json');
  if (!existsSync(file)) {
    throw new Error(`the real node is not up (${file} is missing): run scripts/testenv/up.sh node`);
  }
  return JSON.parse(readFileSync(file, 'utf8')) as NodeFacts;
}

/** Runs kubectl against the node; rejects with kubectl's stderr when it fails. */
export async function kubectl(facts: NodeFacts, args: readonly string[], input?: string): Promise<string> {
  const child = execFile(kube.kubectl, ['--kubeconfig', facts.kubeconfig, ...args], {
    maxBuffer: 64 << 20,
    timeout: 120_000,
  });
  if (input !== undefined) child.stdin?.end(input);
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.on('close', (code) =>
      code === 0 ? resolve(stdout) : reject(new Error(`kubectl ${args.join(' ')}: ${stderr.trim()}`)),
    );
  });
}

export async function kubectlJson<T>(facts: NodeFacts, args: readonly string[]): Promise<T> {
  return JSON.parse(await kubectl(facts, [...args, '-o', 'json'])) as T;
}

export async function helm(facts: NodeFacts, args: readonly string[]): Promise<string> {
  const { stdout } = await run(helmBinary, [...args, '--kubeconfig', facts.kubeconfig], {
    maxBuffer: 16 << 20,
    timeout: 300_000,
  });
  return stdout;
}

export interface PodView {
  metadata: { name: string; uid: string; labels?: Record<string, string>; deletionTimestamp?: string };
  status: {
    phase?: string;
    podIP?: string;
    conditions?: { type: string; status: string }[];
    containerStatuses?: { name: string; ready: boolean; restartCount: number; containerID?: string }[];
  };
}

export async function podsOf(facts: NodeFacts, namespace: string, selector: string): Promise<PodView[]> {
  const list = await kubectlJson<{ items: PodView[] }>(facts, [
    '-n',
    namespace,
    'get',
    'pods',
    '-l',
    selector,
  ]);
  return list.items;
}

export function podReady(pod: PodView): boolean {
  return (
    pod.status.phase === 'Running' &&
    !pod.metadata.deletionTimestamp &&
    pod.status.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True') ===
      true
  );
}

/** The host pid of a pod's container, from containerd (the pod's containerID is containerd://<id>). */
export async function containerPid(facts: NodeFacts, pod: PodView, container: string): Promise<number> {
  const status = pod.status.containerStatuses?.find((candidate) => candidate.name === container);
  const id = status?.containerID?.replace(/^containerd:\/\//, '');
  if (!id) throw new Error(`pod ${pod.metadata.name} has no running ${container} container`);
  const { stdout } = await run('ctr', [
    '--address',
    facts.containerdSocket,
    '--namespace',
    'k8s.io',
    'tasks',
    'ls',
  ]);
  const line = stdout.split('\n').find((candidate) => candidate.startsWith(`${id} `));
  const pid = Number(line?.trim().split(/\s+/)[1]);
  if (!Number.isInteger(pid) || pid <= 0) throw new Error(`no task for container ${id} in containerd`);
  return pid;
}

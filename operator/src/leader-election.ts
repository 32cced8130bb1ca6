// Leader election on a coordination.k8s.io Lease, so that of several operator
// replicas exactly one reconciles. The holder renews the lease every
// `retryPeriodMs`; another replica takes it over only after `leaseDurationMs`
// without a renewal. Writes carry the lease's resourceVersion, so two
// candidates racing for it cannot both win. A leader that fails to renew within
// `renewDeadlineMs` stops leading (the process should exit) before its lease
// can expire and be taken.
import { ApiException, CoordinationV1Api, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import type { Logger } from 'pino';

/** The Lease the operator's replicas elect their leader on; its holder is the leading pod's name. */
export const operatorLeaseName = 'tributary-operator';

export interface LeaderElectionOptions {
  readonly kubeConfig: KubeConfig;
  readonly namespace: string;
  readonly leaseName: string;
  readonly identity: string;
  readonly leaseDurationMs?: number;
  readonly renewDeadlineMs?: number;
  readonly retryPeriodMs?: number;
  readonly logger: Logger;
}

export class LeaderElector {
  readonly #options: Required<Omit<LeaderElectionOptions, 'logger' | 'kubeConfig'>> &
    Pick<LeaderElectionOptions, 'logger'>;
  readonly #api: CoordinationV1Api;
  #leading = false;
  #lastRenew = 0;
  #lastRound = 0;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(options: LeaderElectionOptions) {
    this.#options = {
      namespace: options.namespace,
      leaseName: options.leaseName,
      identity: options.identity,
      leaseDurationMs: options.leaseDurationMs ?? 15_000,
      renewDeadlineMs: options.renewDeadlineMs ?? 10_000,
      retryPeriodMs: options.retryPeriodMs ?? 2_000,
      logger: options.logger,
    };
    this.#api = options.kubeConfig.makeApiClient(CoordinationV1Api);
  }

  get isLeader(): boolean {
    return this.#leading;
  }

  /** When an election round last reached the API server (leader or not): 0 before the first. */
  get lastRoundAt(): number {
    return this.#lastRound;
  }

  /** Calls `onStarted` when this replica becomes leader and `onStopped` if it stops being one. */
  run(onStarted: () => void, onStopped: () => void): void {
    const tick = async () => {
      if (this.#stopped) return;
      try {
        const held = await this.#tryAcquireOrRenew();
        this.#lastRound = Date.now();
        if (held) this.#lastRenew = Date.now();
        if (held && !this.#leading) {
          this.#leading = true;
          this.#options.logger.info({ identity: this.#options.identity }, 'became leader');
          onStarted();
        }
        if (!held && this.#leading) this.#stepDown(onStopped);
      } catch (error) {
        this.#options.logger.warn({ err: error }, 'leader election round failed');
      }
      if (this.#leading && Date.now() - this.#lastRenew > this.#options.renewDeadlineMs)
        this.#stepDown(onStopped);
      if (!this.#stopped) this.#timer = setTimeout(() => void tick(), this.#options.retryPeriodMs);
    };
    void tick();
  }

  #stepDown(onStopped: () => void): void {
    this.#leading = false;
    this.#options.logger.warn({ identity: this.#options.identity }, 'lost leadership');
    onStopped();
  }

  /** Stops campaigning and, when leading, releases the lease so another replica takes over at once. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    if (!this.#leading) return;
    this.#leading = false;
    try {
      const lease = await this.#read();
      if (lease?.spec?.holderIdentity === this.#options.identity) {
        await this.#api.patchNamespacedLease({
          name: this.#options.leaseName,
          namespace: this.#options.namespace,
          body: [
            { op: 'test', path: '/metadata/resourceVersion', value: lease.metadata?.resourceVersion ?? '' },
            { op: 'add', path: '/spec/holderIdentity', value: '' },
          ],
        });
      }
    } catch (error) {
      this.#options.logger.warn({ err: error }, 'could not release the lease');
    }
  }

  async #read(): Promise<V1Lease | undefined> {
    try {
      return await this.#api.readNamespacedLease({
        name: this.#options.leaseName,
        namespace: this.#options.namespace,
      });
    } catch (error) {
      if (error instanceof ApiException && error.code === 404) return undefined;
      throw error;
    }
  }

  async #tryAcquireOrRenew(): Promise<boolean> {
    const { namespace, leaseName: name, identity } = this.#options;
    const now = new Date();
    const durationSeconds = Math.ceil(this.#options.leaseDurationMs / 1000);
    let lease = await this.#read();
    if (!lease) {
      try {
        lease = await this.#api.createNamespacedLease({
          namespace,
          body: {
            metadata: { name, namespace },
            spec: { leaseDurationSeconds: durationSeconds, leaseTransitions: 0 },
          },
        });
      } catch (error) {
        if (error instanceof ApiException && error.code === 409) return false;
        throw error;
      }
    }
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity ?? '';
    const renewedAt = spec.renewTime ? new Date(spec.renewTime).getTime() : 0;
    const expired = renewedAt + (spec.leaseDurationSeconds ?? durationSeconds) * 1000 < now.getTime();
    if (holder !== identity && holder !== '' && !expired) return false;
    const takingOver = holder !== identity;
    // A JSON patch guarded by the resourceVersion it read: of two candidates
    // patching the same version, the second fails its `test`. Times go as
    // MicroTime strings, which client-node's Date serialisation does not produce.
    const patch: object[] = [
      { op: 'test', path: '/metadata/resourceVersion', value: lease.metadata?.resourceVersion ?? '' },
      { op: 'add', path: '/spec/holderIdentity', value: identity },
      { op: 'add', path: '/spec/leaseDurationSeconds', value: durationSeconds },
      { op: 'add', path: '/spec/renewTime', value: microTime(now) },
    ];
    if (takingOver) {
      patch.push({ op: 'add', path: '/spec/acquireTime', value: microTime(now) });
      patch.push({ op: 'add', path: '/spec/leaseTransitions', value: (spec.leaseTransitions ?? 0) + 1 });
    }
    try {
      await this.#api.patchNamespacedLease({ name, namespace, body: patch });
      return true;
    } catch (error) {
      // 409/422: another replica wrote the lease first.
      if (error instanceof ApiException && (error.code === 409 || error.code === 422)) return false;
      throw error;
    }
  }
}

/** metav1.MicroTime: RFC 3339 with exactly six fraction digits. */
function microTime(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

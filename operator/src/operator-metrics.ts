// The operator's own Prometheus metrics: whether this replica leads, and how
// its reconciles go (a reconcile that keeps failing shows here before anyone
// reads the logs), and every mirror's slot as the leader's slot health monitor
// reads it (engine/src/control/slot-health.ts). Mirror progress is in the
// api-server's and engines' metrics.
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { SlotHealthMetrics } from '../../engine/src/index.ts';

export type ReconcileKind = 'mirror' | 'peer' | 'script';

export class OperatorMetrics {
  readonly registry = new Registry();
  /** Each mirror's slot, labelled with the operator's namespace. */
  readonly slotHealth: SlotHealthMetrics;
  readonly #leader: Gauge;
  readonly #reconciles: Counter<'kind' | 'result'>;
  readonly #seconds: Histogram<'kind'>;
  readonly #podProblems: Gauge<'mirror' | 'reason'>;
  /** The reason each mirror's gauge carries now, to remove it when it changes. */
  readonly #podProblemReasons = new Map<string, string>();

  constructor(options: { readonly namespace?: string } = {}) {
    const registers = [this.registry];
    this.slotHealth = new SlotHealthMetrics({ registry: this.registry, namespace: options.namespace });
    collectDefaultMetrics({ register: this.registry, prefix: 'tributary_operator_' });
    this.#leader = new Gauge({
      name: 'tributary_operator_leader',
      help: '1 while this replica holds the leader Lease and acts, 0 while it stands by',
      registers,
    });
    this.#leader.set(0);
    this.#reconciles = new Counter({
      name: 'tributary_operator_reconciles_total',
      help: 'Reconciles by resource kind and result (error: retried with backoff)',
      labelNames: ['kind', 'result'],
      registers,
    });
    this.#seconds = new Histogram({
      name: 'tributary_operator_reconcile_seconds',
      help: 'Time one reconcile took',
      labelNames: ['kind'],
      buckets: [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.#podProblems = new Gauge({
      name: 'tributary_operator_engine_pod_problem',
      help: "1 while a mirror's engine pod cannot run, by the kubelet's reason (CrashLoopBackOff, OOMKilled, ImagePullBackOff, ...)",
      labelNames: ['mirror', 'reason'],
      registers,
    });
  }

  leading(isLeader: boolean): void {
    this.#leader.set(isLeader ? 1 : 0);
  }

  /** What keeps a mirror's engine pod from running now (undefined: nothing). */
  enginePodProblem(mirror: string, reason: string | undefined): void {
    const previous = this.#podProblemReasons.get(mirror);
    if (previous === reason) return;
    if (previous !== undefined) this.#podProblems.remove({ mirror, reason: previous });
    if (reason === undefined) this.#podProblemReasons.delete(mirror);
    else {
      this.#podProblemReasons.set(mirror, reason);
      this.#podProblems.set({ mirror, reason }, 1);
    }
  }

  /** Wraps a reconcile function so that each run is timed and counted. */
  instrument<Args extends unknown[], Result>(
    kind: ReconcileKind,
    reconcile: (...args: Args) => Promise<Result>,
  ): (...args: Args) => Promise<Result> {
    return async (...args) => {
      const stop = this.#seconds.startTimer({ kind });
      try {
        const result = await reconcile(...args);
        this.#reconciles.inc({ kind, result: 'ok' });
        return result;
      } catch (error) {
        this.#reconciles.inc({ kind, result: 'error' });
        throw error;
      } finally {
        stop();
      }
    };
  }
}

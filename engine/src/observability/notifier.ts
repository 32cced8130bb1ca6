// Notifications to a person's webhook: a mirror failed or recovered, its slot
// is in danger or safe again (or was dropped by its retained-WAL limit), one of
// its tables errored or streams again. What happened is decided elsewhere
// (control/mirror-notices.ts, from the catalog, the same in both modes); this
// module only delivers, to one URL per installation read from a file (the URL
// of a Slack webhook is itself a secret, so it comes from a Secret or a file,
// never from a flag or the spec).
//
// Contract of `Notifier`:
// - `notify` never blocks and never throws: it queues and returns. The caller
//   (a control loop or a reconcile) is never held up by a slow or dead receiver.
// - Deliveries are one at a time, in the order queued; a failed one is retried
//   with backoff (`deliveryBackoffMs`) until it is delivered or older than
//   `giveUpAfterMs`, and only then does the next go out.
// - Deduplicated: a notification that says again what the last one queued for
//   the same subject (mirror, table, what it concerns) said is dropped, so one
//   transition is one notification whoever reports it twice. Each carries an
//   `id`, the same on every retry, for a receiver to recognise a delivery it
//   answered and whose answer was lost.
// - Bounded: at most `queueLimit` wait; beyond it the oldest is dropped (and
//   counted in the log), so a dead receiver costs bounded memory.
// - Never a secret or a row value: the bodies hold names, kinds, reasons and the
//   engine's messages (which by the error policy carry neither), cut to one
//   line and with any URL's credentials masked; the log never shows the URL.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import { EngineError } from '../errors.ts';

export const notificationKinds = [
  'mirror_failed',
  'mirror_recovered',
  'slot_in_danger',
  'slot_recovered',
  'slot_dropped',
  'table_errored',
  'table_recovered',
] as const;
export type NotificationKind = (typeof notificationKinds)[number];

/** What each kind means to a receiver deciding how loud to be. */
export const notificationSeverity = {
  mirror_failed: 'critical',
  mirror_recovered: 'resolved',
  slot_in_danger: 'critical',
  slot_recovered: 'resolved',
  slot_dropped: 'critical',
  table_errored: 'warning',
  table_recovered: 'resolved',
} as const satisfies Record<NotificationKind, 'critical' | 'warning' | 'resolved'>;

/** What a kind is about: a failure and its recovery share a subject, so dedup sees them as one story. */
const subjectOf = {
  mirror_failed: 'mirror',
  mirror_recovered: 'mirror',
  slot_in_danger: 'slot',
  slot_recovered: 'slot',
  slot_dropped: 'slot',
  table_errored: 'table',
  table_recovered: 'table',
} as const satisfies Record<NotificationKind, 'mirror' | 'slot' | 'table'>;

export interface Notification {
  readonly kind: NotificationKind;
  readonly mirror: string;
  /** The source table (schema.table), for the table kinds. */
  readonly table?: string | undefined;
  /** A short machine word: the slot health reason, the error kind. */
  readonly reason?: string | undefined;
  /** One line for a person (an engine message: no secret, no row value). */
  readonly message: string;
  /** When it was seen. */
  readonly at: Date;
}

export const notificationFormats = ['json', 'slack'] as const;
export type NotificationFormat = (typeof notificationFormats)[number];

/** Where notifications go: the URL is read from `urlFile` at every attempt (a rotated Secret is used at once). */
export interface WebhookConfig {
  readonly urlFile: string;
  readonly format: NotificationFormat;
}

/** Who sends: told in every body, so one receiver can serve several installations. */
export interface NotificationOrigin {
  readonly installation: string;
  /** The operator's namespace; absent in standalone mode. */
  readonly namespace?: string | undefined;
}

const messageLimit = 1000;

/** One line, cut to a bound, with a URL's user and password masked should a message ever hold one. */
export function safeMessage(message: string): string {
  const line = message.replace(/\s+/g, ' ').trim();
  const masked = line.replace(/([a-z][a-z0-9+.-]*:\/\/)[^\s/@]+@/gi, '$1***@');
  return masked.length > messageLimit ? `${masked.slice(0, messageLimit - 1)}…` : masked;
}

/** The plain JSON body (docs/observability.md, Notifications). */
export function jsonBody(notification: Notification, id: string, origin: NotificationOrigin) {
  return {
    version: 1,
    id,
    kind: notification.kind,
    severity: notificationSeverity[notification.kind],
    installation: origin.installation,
    ...(origin.namespace === undefined ? {} : { namespace: origin.namespace }),
    mirror: notification.mirror,
    ...(notification.table === undefined ? {} : { table: notification.table }),
    ...(notification.reason === undefined ? {} : { reason: notification.reason }),
    message: safeMessage(notification.message),
    at: notification.at.toISOString(),
  };
}

const headlines = {
  mirror_failed: 'failed',
  mirror_recovered: 'recovered',
  slot_in_danger: 'replication slot in danger',
  slot_recovered: 'replication slot healthy again',
  slot_dropped: 'replication slot dropped (retained WAL limit)',
  table_errored: 'table errored',
  table_recovered: 'table streaming again',
} as const satisfies Record<NotificationKind, string>;

/** A Slack incoming webhook's body (`text`, which also suits Mattermost and most chat webhooks). */
export function slackBody(notification: Notification, origin: NotificationOrigin) {
  const where = origin.namespace === undefined ? '' : ` (namespace ${origin.namespace})`;
  const table = notification.table === undefined ? '' : ` table ${notification.table}:`;
  const mark = notificationSeverity[notification.kind] === 'resolved' ? ':white_check_mark:' : ':warning:';
  return {
    text: `${mark} Tributary mirror *${notification.mirror}*${where}: ${headlines[notification.kind]}.${table} ${safeMessage(notification.message)}`,
  };
}

/** The delay before the `attempt`-th retry (1 the first): doubling from `initialMs` to `maxMs`. */
export function deliveryBackoffMs(
  attempt: number,
  backoff: DeliveryBackoff = defaultDeliveryBackoff,
): number {
  if (attempt <= 0) return 0;
  return Math.min(backoff.initialMs * 2 ** Math.min(attempt - 1, 30), backoff.maxMs);
}

export interface DeliveryBackoff {
  readonly initialMs: number;
  readonly maxMs: number;
}
export const defaultDeliveryBackoff: DeliveryBackoff = { initialMs: 1_000, maxMs: 5 * 60_000 };

/**
 * Whether `notification` says again what `last` (the previous one queued for its
 * subject) said: the same kind, reason, and for a failure the same message.
 */
export function repeats(last: Notification | undefined, notification: Notification): boolean {
  if (!last || last.kind !== notification.kind || last.reason !== notification.reason) return false;
  // A mirror failing again for another cause is news; a slot or table in the same state is not.
  return notification.kind !== 'mirror_failed' || last.message === notification.message;
}

const subjectKey = (notification: Notification) =>
  JSON.stringify([notification.mirror, subjectOf[notification.kind], notification.table ?? '']);

/** The webhook URL held by `file`: one line, http or https. Throws a config error naming the file, never its content. */
export function readWebhookUrl(file: string): URL {
  let text: string;
  try {
    text = readFileSync(file, 'utf8').trim();
  } catch {
    throw new EngineError('config', `notification webhook URL file ${file} cannot be read`);
  }
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new EngineError('config', `notification webhook URL file ${file} does not hold a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new EngineError('config', `notification webhook URL file ${file} must hold an http or https URL`);
  return url;
}

/**
 * TRIBUTARY_NOTIFY_URL_FILE and TRIBUTARY_NOTIFY_FORMAT, read once at start-up;
 * undefined when no webhook is configured. Throws a config error when the file
 * is unreadable or holds no URL, so a typo stops the process at start, not at
 * the first failure.
 */
export function webhookConfigFromEnvironment(
  env: NodeJS.ProcessEnv = process.env,
  urlFile: string | undefined = env.TRIBUTARY_NOTIFY_URL_FILE || undefined,
): WebhookConfig | undefined {
  if (urlFile === undefined) return undefined;
  const format = env.TRIBUTARY_NOTIFY_FORMAT || 'json';
  if (!(notificationFormats as readonly string[]).includes(format))
    throw new EngineError(
      'config',
      `TRIBUTARY_NOTIFY_FORMAT must be one of ${notificationFormats.join(', ')}`,
    );
  readWebhookUrl(urlFile);
  return { urlFile, format: format as NotificationFormat };
}

/** See the contract at the top of this file. */
export interface Notifier {
  notify(notification: Notification): void;
  /** The mirror is gone: what it was last told is forgotten (a new mirror of its name starts afresh). */
  forget(mirror: string): void;
  /** Stops delivering; waits up to `graceMs` for what is queued to go out. */
  close(graceMs?: number): Promise<void>;
}

export interface WebhookNotifierOptions {
  readonly config: WebhookConfig;
  readonly origin: () => Promise<NotificationOrigin>;
  readonly logger: Logger;
  readonly backoff?: DeliveryBackoff;
  /** A notification still undelivered this long after it was queued is given up (default a day). */
  readonly giveUpAfterMs?: number;
  readonly queueLimit?: number;
  /** One attempt's time limit (default 10 s). */
  readonly attemptTimeoutMs?: number;
}

interface Queued {
  readonly id: string;
  readonly notification: Notification;
  readonly queuedAt: number;
}

export class WebhookNotifier implements Notifier {
  readonly #options: WebhookNotifierOptions;
  readonly #queue: Queued[] = [];
  /** The last notification queued per subject, for dedup. */
  readonly #last = new Map<string, Notification>();
  #origin: NotificationOrigin | undefined;
  #draining: Promise<void> | undefined;
  #wake: (() => void) | undefined;
  #closed = false;
  /** Dropped since the last log line about it. */
  #droppedUnlogged = 0;
  /** The cause of the failing delivery already logged, so an outage is one warning. */
  #failing: string | undefined;

  constructor(options: WebhookNotifierOptions) {
    this.#options = options;
  }

  notify(notification: Notification): void {
    if (this.#closed) return;
    const key = subjectKey(notification);
    if (repeats(this.#last.get(key), notification)) return;
    this.#last.set(key, notification);
    const limit = this.#options.queueLimit ?? 1000;
    while (this.#queue.length >= limit) {
      this.#queue.shift();
      this.#droppedUnlogged++;
    }
    if (this.#droppedUnlogged > 0) {
      this.#options.logger.warn(
        { dropped: this.#droppedUnlogged },
        'notification queue full: oldest notifications dropped',
      );
      this.#droppedUnlogged = 0;
    }
    this.#queue.push({ id: randomUUID(), notification, queuedAt: Date.now() });
    this.#draining ??= this.#drain().finally(() => {
      this.#draining = undefined;
    });
  }

  forget(mirror: string): void {
    for (const key of this.#last.keys())
      if ((JSON.parse(key) as string[])[0] === mirror) this.#last.delete(key);
  }

  async close(graceMs = 5_000): Promise<void> {
    const draining = this.#draining;
    if (draining) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([draining, new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))]);
      clearTimeout(timer);
    }
    this.#closed = true;
    this.#wake?.();
    await this.#draining;
  }

  async #drain(): Promise<void> {
    const giveUpAfterMs = this.#options.giveUpAfterMs ?? 24 * 3_600_000;
    let attempt = 0;
    while (!this.#closed) {
      const head = this.#queue[0];
      if (!head) return;
      const failure = await this.#deliver(head);
      if (failure === undefined) {
        // Unless the queue overflowed meanwhile and dropped it already.
        if (this.#queue[0] === head) this.#queue.shift();
        attempt = 0;
        if (this.#failing !== undefined) {
          this.#failing = undefined;
          this.#options.logger.info('notification webhook answers again: delivered');
        }
        continue;
      }
      if (Date.now() - head.queuedAt >= giveUpAfterMs) {
        if (this.#queue[0] === head) this.#queue.shift();
        this.#options.logger.warn(
          { mirror: head.notification.mirror, kind: head.notification.kind, cause: failure },
          'notification given up: undelivered for too long',
        );
        attempt = 0;
        continue;
      }
      if (this.#failing !== failure) {
        this.#failing = failure;
        this.#options.logger.warn(
          { cause: failure, waiting: this.#queue.length },
          'notification delivery failed; retrying with backoff',
        );
      }
      attempt++;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, deliveryBackoffMs(attempt, this.#options.backoff));
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = undefined;
    }
  }

  /** One attempt; undefined when the receiver took it, otherwise why not (never the URL). */
  async #deliver(queued: Queued): Promise<string | undefined> {
    const { config, attemptTimeoutMs } = { attemptTimeoutMs: 10_000, ...this.#options };
    let url: URL;
    try {
      url = readWebhookUrl(config.urlFile);
      this.#origin ??= await this.#options.origin();
    } catch (error) {
      return error instanceof EngineError ? error.message : 'the sender cannot be named';
    }
    const body =
      config.format === 'slack'
        ? slackBody(queued.notification, this.#origin)
        : jsonBody(queued.notification, queued.id, this.#origin);
    try {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': 'tributary' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(attemptTimeoutMs),
        redirect: 'error',
      });
      await response.body?.cancel();
      return response.ok ? undefined : `the webhook answered ${response.status}`;
    } catch (error) {
      const code = (error as { cause?: { code?: unknown } }).cause?.code;
      if ((error as Error).name === 'TimeoutError') return 'the webhook did not answer in time';
      return `the webhook cannot be reached${typeof code === 'string' ? ` (${code})` : ''}`;
    }
  }
}

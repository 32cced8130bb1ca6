// Debezium Server (Java) with its Kafka sink, from the distribution that
// bench/sh/debezium.sh fetches from Maven Central: the PostgreSQL connector
// (pgoutput) writing JSON to the test Kafka with acks=all and an idempotent
// producer, everything else at Debezium's defaults.
// https://debezium.io/documentation/reference/stable/operations/debezium-server.html
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, openSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TestDatabase } from '../../test/support/databases.ts';
import { kafka, repoRoot } from '../../test/support/testenv.ts';
import { until } from '../lib/stats.ts';

const script = join(repoRoot, 'bench', 'sh', 'debezium.sh');

export interface DebeziumInstall {
  readonly home: string;
  readonly java: string;
}

/** Fetches Debezium Server once and finds a Java for it; throws with the reason when it cannot. */
export function installDebezium(): DebeziumInstall {
  const home = execFileSync(script, ['install'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
  const java = execFileSync(script, ['java'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
  return { home, java };
}

export interface DebeziumRun {
  readonly source: TestDatabase;
  readonly table: string;
  /** Topics are `<prefix>.public.<table>`. */
  readonly topicPrefix: string;
  readonly slotName: string;
  readonly publicationName: string;
  /** `initial`: snapshot then stream; `no_data`: stream from the slot only. */
  readonly snapshotMode: 'initial' | 'no_data';
}

export function debeziumTopic(run: DebeziumRun): string {
  return `${run.topicPrefix}.public.${run.table}`;
}

function properties(run: DebeziumRun, directory: string): string {
  const { host, port, user, password, database } = run.source.config;
  const settings: Record<string, string | number | boolean> = {
    'debezium.sink.type': 'kafka',
    'debezium.sink.kafka.producer.bootstrap.servers': kafka.plaintextBroker,
    'debezium.sink.kafka.producer.key.serializer': 'org.apache.kafka.common.serialization.StringSerializer',
    'debezium.sink.kafka.producer.value.serializer': 'org.apache.kafka.common.serialization.StringSerializer',
    'debezium.sink.kafka.producer.acks': 'all',
    'debezium.sink.kafka.producer.enable.idempotence': true,
    'debezium.source.connector.class': 'io.debezium.connector.postgresql.PostgresConnector',
    'debezium.source.offset.storage.file.filename': join(directory, 'offsets.dat'),
    'debezium.source.offset.flush.interval.ms': 0,
    'debezium.source.database.hostname': host,
    'debezium.source.database.port': port,
    'debezium.source.database.user': user,
    'debezium.source.database.password': password,
    'debezium.source.database.dbname': database,
    'debezium.source.topic.prefix': run.topicPrefix,
    'debezium.source.table.include.list': `public.${run.table}`,
    'debezium.source.plugin.name': 'pgoutput',
    'debezium.source.slot.name': run.slotName,
    'debezium.source.publication.name': run.publicationName,
    'debezium.source.publication.autocreate.mode': 'disabled',
    'debezium.source.snapshot.mode': run.snapshotMode,
    // Numerics as strings, as Tributary writes them (the default is base64 bytes).
    'debezium.source.decimal.handling.mode': 'string',
    // The JSON converter without its inline schemas: smaller messages, in Debezium's favour.
    'debezium.format.key': 'json',
    'debezium.format.value': 'json',
    'debezium.format.key.schemas.enable': false,
    'debezium.format.value.schemas.enable': false,
    'quarkus.log.level': 'WARN',
    'quarkus.http.port': 0,
  };
  return `${Object.entries(settings)
    .map(([key, value]) => `${key}=${value}`)
    .join('\n')}\n`;
}

function runnerJar(home: string): string {
  const jar = readdirSync(home).find((name) => name.endsWith('-runner.jar'));
  if (!jar) throw new Error(`no Debezium Server runner jar in ${home}`);
  return jar;
}

export class DebeziumServer {
  readonly #process: ChildProcess;
  readonly #log: string;
  #exited = false;

  private constructor(child: ChildProcess, log: string) {
    this.#process = child;
    this.#log = log;
    child.on('exit', () => {
      this.#exited = true;
    });
  }

  static start(install: DebeziumInstall, run: DebeziumRun): DebeziumServer {
    const directory = join(repoRoot, '.bench', 'debezium', run.topicPrefix);
    mkdirSync(join(directory, 'config'), { recursive: true });
    writeFileSync(join(directory, 'config', 'application.properties'), properties(run, directory));
    const log = join(directory, 'server.log');
    const output = openSync(log, 'a');
    const child = spawn(
      install.java,
      [
        '-cp',
        [
          join(install.home, runnerJar(install.home)),
          join(install.home, 'config', 'lib'),
          join(install.home, 'lib', '*'),
        ].join(':'),
        'io.debezium.server.Main',
      ],
      { cwd: directory, stdio: ['ignore', output, output] },
    );
    return new DebeziumServer(child, log);
  }

  /** Throws with the end of its log if the server has exited. */
  assertRunning(): void {
    if (this.#exited) {
      const tail = readFileSync(this.#log, 'utf8').split('\n').slice(-30).join('\n');
      throw new Error(`Debezium Server exited:\n${tail}`);
    }
  }

  /** The server's peak resident memory so far (VmHWM), MiB. */
  peakRssMiB(): number {
    try {
      const status = readFileSync(`/proc/${this.#process.pid}/status`, 'utf8');
      const match = /^VmHWM:\s+(\d+) kB/m.exec(status);
      return match?.[1] ? Math.round(Number(match[1]) / 1024) : Number.NaN;
    } catch {
      return Number.NaN;
    }
  }

  async stop(): Promise<void> {
    if (this.#exited) return;
    this.#process.kill('SIGTERM');
    try {
      await until('debezium exit', async () => this.#exited, 30_000, 100);
    } catch {
      this.#process.kill('SIGKILL');
      await until('debezium exit after SIGKILL', async () => this.#exited, 10_000, 100);
    }
  }
}

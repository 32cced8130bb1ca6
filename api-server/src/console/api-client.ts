// The console's only way to the data: the facade's own /api/v1 (and the /metrics text, routes.ts),
// called in-process with the visitor's credentials (app.inject), so the console
// shows and does exactly what the interface allows that visitor.

import type { FastifyInstance } from 'fastify';
import type { TableStatusView } from '../../../engine/src/index.ts';

export interface ApiAnswer<Body> {
  readonly status: number;
  readonly body: Body;
}

export class ApiClient {
  readonly #app: FastifyInstance;
  readonly #authorization: string | undefined;
  readonly #remoteAddress: string | undefined;

  /**
   * `remoteAddress`: the visitor's address as the facade saw it, so that the
   * API calls' audit entries say where a console action came from.
   */
  constructor(app: FastifyInstance, authorization: string | undefined, remoteAddress?: string) {
    this.#app = app;
    this.#authorization = authorization;
    this.#remoteAddress = remoteAddress;
  }

  async post<Body>(url: string, payload: unknown): Promise<ApiAnswer<Body>> {
    const response = await this.#app.inject({
      method: 'POST',
      url,
      payload: JSON.stringify(payload),
      headers: { 'content-type': 'application/json', ...this.#headers() },
      ...this.#from(),
    });
    return { status: response.statusCode, body: response.json() as Body };
  }

  async get<Body>(url: string): Promise<ApiAnswer<Body>> {
    const response = await this.#app.inject({
      method: 'GET',
      url,
      headers: this.#headers(),
      ...this.#from(),
    });
    return { status: response.statusCode, body: response.json() as Body };
  }

  #headers(): Record<string, string> {
    return this.#authorization ? { authorization: this.#authorization } : {};
  }

  #from(): { remoteAddress?: string } {
    return this.#remoteAddress ? { remoteAddress: this.#remoteAddress } : {};
  }
}

/** The parts of the interface's answers the console reads. */
export interface MirrorStatus {
  readonly flowJobName: string;
  readonly currentFlowState: string;
  readonly errorMessage: string;
  readonly ok: boolean;
  readonly lagSeconds?: number;
  readonly slotHealth?: {
    readonly slotName: string;
    readonly checkedAt: string;
    readonly status: 'True' | 'False' | 'Unknown';
    readonly reason: string;
    readonly message: string;
    readonly active?: boolean;
    readonly walStatus?: string;
    readonly retainedWalBytes?: string;
    readonly unconfirmedBytes?: string;
    readonly safeWalSizeBytes?: string;
    readonly invalidationReason?: string;
  };
  /** Each table's state and what CDC applied to it; absent while no table is tracked. */
  readonly tables?: readonly TableStatusView[];
  readonly cdcStatus?: {
    readonly config: Record<string, unknown> & {
      readonly sourceName: string;
      readonly destinationName: string;
      readonly tableMappings: readonly {
        sourceTableIdentifier: string;
        destinationTableIdentifier: string;
      }[];
    };
    readonly snapshotStatus: {
      readonly clones: readonly {
        sourceTable: string;
        tableName: string;
        numPartitionsCompleted: number;
        numPartitionsTotal: number;
        numRowsSynced: string;
        consolidateCompleted: boolean;
      }[];
    };
    readonly sourceType: string;
    readonly destinationType: string;
  };
}

export interface Batches {
  readonly cdcBatches: readonly {
    batchId: string;
    startTime: string;
    endTime: string | null;
    numRows: string;
    endLsn: string;
  }[];
  readonly total: number;
}

export interface Logs {
  readonly errors: readonly {
    errorMessage: string;
    errorType: string;
    errorTimestamp: number;
    id: number;
    repeatCount: number;
    lastErrorTimestamp: number;
  }[];
  readonly total: number;
  readonly page: number;
}

export interface PeerInfo {
  readonly peer?: { readonly name: string; readonly type: string } & Record<string, unknown>;
  readonly version?: string;
}

export interface PeerList {
  /** `problem`: why a peer's secrets cannot be read (cluster mode), for a peer shown broken. */
  readonly items: readonly { readonly name: string; readonly type: string; readonly problem?: string }[];
}

/** GET /api/v1/audit's answer (docs/api.md). */
export interface AuditPage {
  readonly entries: readonly {
    readonly id: string;
    readonly time: string;
    readonly user: string;
    readonly role: string;
    readonly action: string;
    readonly route: string;
    readonly object: string;
    readonly detail: string;
    readonly clientAddress: string;
    readonly status: number;
  }[];
  readonly total: number;
  readonly page: number;
}

export interface ScriptEntry {
  readonly id: number;
  readonly name: string;
  readonly lang: string;
  readonly source: string;
}

export interface Scripts {
  readonly scripts: readonly ScriptEntry[];
}

/** The interface's error body (grpc-gateway shape). */
export interface ApiErrorBody {
  readonly code?: number;
  readonly message?: string;
}

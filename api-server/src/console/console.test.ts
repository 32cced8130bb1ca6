import { describe, expect, it } from 'vitest';
import { html } from './html.ts';
import { confirmPage, type MirrorPageData, mirrorPage } from './pages.ts';
import { mirrorGauges } from './prometheus-text.ts';
import { scriptListPage, scriptPage } from './resource-pages.ts';

describe('console html', () => {
  it('escapes every interpolated value but nested fragments', () => {
    const name = `<script>alert("x")</script>&'`;
    const fragment = html`<b>${name}</b>`;
    expect(html`<p title="${name}">${fragment}${[1, null, false, 'a<b']}</p>`.text).toBe(
      '<p title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;"><b>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;</b>1a&lt;b</p>',
    );
  });
});

describe('console metrics reading', () => {
  it('gathers the gauges of each mirror the facade lists, and ignores engine-only series', () => {
    const text = [
      '# HELP tributary_mirror_phase Current phase of each mirror (1 for its phase)',
      'tributary_mirror_phase{mirror="b",phase="STATUS_PAUSED"} 1',
      'tributary_mirror_phase{mirror="a",phase="STATUS_RUNNING"} 1',
      'tributary_mirror_rows_synced{mirror="a"} 251',
      'tributary_mirror_last_batch_id{mirror="a"} 7',
      'tributary_mirror_seconds_since_last_batch{mirror="a"} 2.5',
      'tributary_engine_replication_lag_bytes{mirror="a"} 568',
      'tributary_engine_replication_lag_bytes{mirror="gone"} 10',
      'tributary_engine_process_resident_memory_bytes 1000',
    ].join('\n');
    expect(mirrorGauges(text)).toEqual([
      {
        mirror: 'a',
        state: 'STATUS_RUNNING',
        rowsSynced: 251,
        lastBatchId: 7,
        secondsSinceLastBatch: 2.5,
        lagBytes: 568,
      },
      { mirror: 'b', state: 'STATUS_PAUSED' },
    ]);
  });
});

describe('drop confirmation', () => {
  const config = {
    sourceName: 'shop',
    destinationName: 'warehouse',
    tableMappings: [
      { sourceTableIdentifier: 'public.orders', destinationTableIdentifier: 'public.orders_copy' },
      { sourceTableIdentifier: 'public.items', destinationTableIdentifier: 'public.items' },
    ],
    replicationSlotName: 'orders_slot',
    publicationName: '',
  };

  it('names the mirror, its tables, its peers and the slot it removes', () => {
    const text = confirmPage('orders', 'drop', config);
    expect(text).toContain('<h1>Drop mirror orders?</h1>');
    expect(text).toContain('from shop to warehouse stops');
    expect(text).toContain('<tr><td>public.orders</td><td>public.orders_copy</td></tr>');
    expect(text).toContain('<tr><td>public.items</td><td>public.items</td></tr>');
    expect(text).toContain('the replication slot <code>orders_slot</code>, unless it was adopted');
    expect(text).toContain('and the publication the mirror created');
    expect(text).toContain('<button type="submit" class="danger">Drop mirror orders</button>');
  });

  it('says a publication given to the mirror stays', () => {
    const text = confirmPage('orders', 'drop', {
      ...config,
      replicationSlotName: '',
      publicationName: 'pub',
    });
    expect(text).toContain(
      'the replication slot the mirror created; the publication <code>pub</code> was given and stays',
    );
  });
});

describe('console mirror page', () => {
  it("shows each table's state, rows applied, last commit and problem, and removed tables", () => {
    const mapping = (source: string) => ({
      sourceTableIdentifier: source,
      destinationTableIdentifier: source,
    });
    const table = (source: string, state: string, extra: object = {}) => ({
      sourceTableIdentifier: source,
      destinationTableIdentifier: source,
      state: state as 'TABLE_STATE_STREAMING',
      stateSince: '2026-01-01T00:00:00.000Z',
      rowsApplied: { inserts: '5', updates: '2', deletes: '1' },
      lastAppliedLsn: '4242',
      lastCommitTime: '2026-01-01T00:00:01.000Z',
      ...extra,
    });
    const text = mirrorPage({
      status: {
        flowJobName: 'm',
        currentFlowState: 'STATUS_RUNNING',
        errorMessage: '',
        ok: true,
        tables: [
          table('public.a', 'TABLE_STATE_STREAMING'),
          table('public.b', 'TABLE_STATE_ERRORED', {
            error: { kind: 'destination_write', message: 'value <refused>', remedy: 'fix it' },
            behindLsn: '77',
          }),
          table('public.gone', 'TABLE_STATE_REMOVED'),
        ],
        cdcStatus: {
          config: {
            sourceName: 's',
            destinationName: 'd',
            tableMappings: [mapping('public.a'), mapping('public.b')],
          },
          snapshotStatus: { clones: [] },
          sourceType: 'RELATIONAL',
          destinationType: 'RELATIONAL',
        },
      },
      batches: { cdcBatches: [], total: 0 },
      logs: { errors: [], total: 0, page: 1 },
      level: 'ALL',
      peers: [],
      sampleMs: 10_000,
      role: 'admin',
    });
    // The state line names the stopped table, linked to the tables.
    expect(text).toContain('<a class="error" href="#tables">1 table stopped: public.b</a>');
    const rows = text.slice(text.indexOf('<h2 id="tables">Tables</h2>'), text.indexOf('<h2>Peers</h2>'));
    expect(rows).toContain(
      '<td class="state">streaming<form method="post" action="/mirrors/m/tables/resync">',
    );
    expect(rows).toContain('<td>5 / 2 / 1</td>');
    expect(rows).toContain('2026-01-01T00:00:01.000Z (LSN 4242)');
    expect(rows).toContain(
      '<td class="state">errored<br><span class="error">destination_write: value &lt;refused&gt; (fix it); behind from LSN 77</span><form method="post" action="/mirrors/m/tables/resync">',
    );
    // The errored table has the resync button, and so has the streaming one (a
    // PostgreSQL destination resyncs it online); the removed one has none.
    expect(rows).toContain('<input type="hidden" name="table" value="public.b">');
    expect(rows).toContain('<input type="hidden" name="table" value="public.a">');
    expect(rows.match(/tables\/resync/g)).toHaveLength(2);
    expect(rows).toContain('<td>public.gone</td><td>public.gone</td>\n<td class="state">removed</td>');
    // No inline script or style (the console's CSP).
    expect(rows).not.toMatch(/<script|style=/);
  });
});

describe('console pages by role', () => {
  const pageOf = (role: MirrorPageData['role'], currentFlowState: string) =>
    mirrorPage({
      status: {
        flowJobName: 'm',
        currentFlowState,
        errorMessage: '',
        ok: true,
        tables: [
          {
            sourceTableIdentifier: 'public.a',
            destinationTableIdentifier: 'public.a',
            state: 'TABLE_STATE_ERRORED',
            stateSince: '2026-01-01T00:00:00.000Z',
            rowsApplied: { inserts: '0', updates: '0', deletes: '0' },
            lastAppliedLsn: '0',
            error: { kind: 'destination_write', message: 'refused', remedy: 'fix it' },
          },
        ],
        cdcStatus: {
          config: {
            sourceName: 's',
            destinationName: 'd',
            tableMappings: [{ sourceTableIdentifier: 'public.a', destinationTableIdentifier: 'public.a' }],
          },
          snapshotStatus: { clones: [] },
          sourceType: 'RELATIONAL',
          destinationType: 'RELATIONAL',
        },
      },
      batches: { cdcBatches: [], total: 0 },
      logs: { errors: [], total: 0, page: 1 },
      level: 'ALL',
      peers: [],
      sampleMs: 10_000,
      role,
    });
  const offered = (text: string) => ({
    pause: text.includes('/mirrors/m/confirm?action=pause'),
    resume: text.includes('/mirrors/m/confirm?action=resume'),
    drop: text.includes('/mirrors/m/confirm?action=drop'),
    resync: text.includes('action="/mirrors/m/tables/resync"'),
  });

  it('offers a read credential no action, and says why', () => {
    for (const state of ['STATUS_RUNNING', 'STATUS_PAUSED']) {
      const text = pageOf('read', state);
      expect(offered(text)).toEqual({ pause: false, resume: false, drop: false, resync: false });
      expect(text).toContain(
        'Read-only: pausing and resuming need the operate role, dropping the admin role.',
      );
    }
  });

  it('offers an operate credential pause, resume and resync, and no drop', () => {
    expect(offered(pageOf('operate', 'STATUS_RUNNING'))).toEqual({
      pause: true,
      resume: false,
      drop: false,
      resync: true,
    });
    expect(offered(pageOf('operate', 'STATUS_PAUSED'))).toMatchObject({ resume: true, drop: false });
  });

  it('offers an admin credential every action', () => {
    expect(offered(pageOf('admin', 'STATUS_RUNNING'))).toEqual({
      pause: true,
      resume: false,
      drop: true,
      resync: true,
    });
  });

  it('shows scripts read-only to credentials that may not save them', () => {
    const script = { id: 3, name: 'mask', source: 'return 1' };
    const readOnly = scriptPage({ ...script, canEdit: false });
    expect(readOnly).not.toContain('<button type="submit" name="intent" value="save">Save</button>');
    expect(readOnly).toContain('spellcheck="false" readonly>');
    expect(readOnly).toContain('Read-only: saving scripts needs the admin role.');
    expect(scriptPage({ ...script, canEdit: true })).toContain(
      '<button type="submit" name="intent" value="save">Save</button>',
    );
    // Running on a sample runs code through the API: the admin role's, as saving.
    expect(readOnly).not.toContain('Run on the sample');
    expect(scriptListPage([], { canEdit: false })).not.toContain('/scripts/new');
    expect(scriptListPage([], { canEdit: true })).toContain('<a href="/scripts/new">New script</a>');
  });
});

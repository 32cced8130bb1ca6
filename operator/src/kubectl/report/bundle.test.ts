import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ReportBundle } from './bundle.ts';

describe('a support bundle’s files', () => {
  it('scrubs a Secret’s values from files added before it was read', () => {
    const bundle = new ReportBundle();
    bundle.addText('engine/pod.engine.log', 'connected with hunter22-and-more\n');
    bundle.addObject('mirrors/orders.yaml', { status: { errorMessage: 'rejected hunter22-and-more' } });
    bundle.addSecret('secrets/shop-db.yaml', {
      metadata: { labels: { 'tributary.dev/peer-secret': 'true' } },
      data: { password: Buffer.from('hunter22-and-more').toString('base64') },
    });
    bundle.problem('operator', 'no Lease');
    const files = bundle.files((paths, problems) => `${paths.join(',')}|${problems.join(',')}`);
    expect(files.map((file) => file.path)).toEqual([
      'README.txt',
      'engine/pod.engine.log',
      'mirrors/orders.yaml',
      'secrets/shop-db.yaml',
    ]);
    expect(files[0]?.text).toBe(
      'engine/pod.engine.log,mirrors/orders.yaml,secrets/shop-db.yaml|operator: no Lease',
    );
    for (const file of files) expect(file.text).not.toContain('hunter22');
    expect(files[1]?.text).toBe('connected with <redacted>\n');
    expect(parse(files[3]?.text ?? '')).toEqual({
      metadata: { labels: { 'tributary.dev/peer-secret': 'true' } },
      data: { password: '<redacted>: 17 bytes' },
    });
  });
});

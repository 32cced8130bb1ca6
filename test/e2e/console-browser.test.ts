// The web console in a real browser (Debian's chromium driven by playwright-core):
// a running mirror in the list, its page, pause with the button and its
// confirmation, a failed mirror's error in the logs view filtered by level,
// axe-core's accessibility rules on every page, no page breaking the console's
// Content-Security-Policy, and a page of another site that frames the console
// getting nothing of it. Screenshots of each page go to
// .testenv/console-screenshots/ (and of the page at hand when a step fails);
// TRIBUTARY_CONSOLE_SCREENSHOTS=docs/console writes the ones docs/console.md shows.
import { existsSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium, type Locator, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestDatabase,
  randomSuffix,
  type TestDatabase,
  waitFor,
  waitForSameRows,
} from '../support/databases.ts';
import {
  createRelationalPeers,
  createTableMirror,
  mirrorState,
  type StandaloneProcess,
  startStandalone,
} from '../support/standalone-process.ts';
import { repoRoot, testenvDir } from '../support/testenv.ts';

const chromiumPath = '/usr/bin/chromium';
const password = 'console-browser-password';
const screenshotDir = join(testenvDir, 'console-screenshots');
const docsScreenshotDir = process.env.TRIBUTARY_CONSOLE_SCREENSHOTS
  ? join(repoRoot, process.env.TRIBUTARY_CONSOLE_SCREENSHOTS)
  : undefined;
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** The text a person sees in an element (Playwright's innerText: layout-aware, cells apart). */
function shownText(locator: Locator): Promise<string> {
  // biome-ignore lint/performance/useDomNodeTextContent: Playwright's Locator.innerText, not the DOM property
  return locator.innerText();
}

interface AxeViolation {
  readonly id: string;
  readonly help: string;
  readonly nodes: readonly { readonly target: readonly string[] }[];
}

describe('web console in chromium', () => {
  let source: TestDatabase;
  let destination: TestDatabase;
  let service: StandaloneProcess;
  let browser: Browser;
  let page: Page;
  /** What the console's pages wrote about their Content-Security-Policy: nothing, as they load no inline code. */
  const policyViolations: string[] = [];
  /**
   * Another origin on the console's host (another port: the same site, so the
   * browser's stored credentials go with the frame), whose page frames the
   * console's drop confirmation.
   */
  let framingSite: Server;
  const dataDir = join(mkdtempSync(join(tmpdir(), 'tributary-console-browser-')), 'data');
  const suffix = randomSuffix();
  const mirror = `shop-${suffix}`;
  const broken = `notes-${suffix}`;

  const state = (name: string) => mirrorState(service, name);
  const createMirror = (name: string, table: string) =>
    createTableMirror(service, {
      name,
      sourcePeer: `src-${suffix}`,
      destinationPeer: `dst-${suffix}`,
      table,
    });

  /** Runs one step; on failure keeps a screenshot of the page, named after the step. */
  async function step(name: string, body: () => Promise<void>): Promise<void> {
    try {
      await body();
      mkdirSync(screenshotDir, { recursive: true });
      await page.screenshot({ path: join(screenshotDir, `${name}.png`), fullPage: true });
    } catch (error) {
      mkdirSync(screenshotDir, { recursive: true });
      const path = join(screenshotDir, `${name}-failed.png`);
      await page.screenshot({ path, fullPage: true }).catch(() => {});
      throw new Error(`${name} failed (screenshot: ${path})`, { cause: error });
    }
  }

  async function expectAccessible(): Promise<void> {
    // Evaluated, not added as an inline script tag, which the console's CSP refuses.
    await page.evaluate(axeSource);
    const violations = await page.evaluate(async () => {
      const axe = (globalThis as unknown as { axe: { run(): Promise<{ violations: AxeViolation[] }> } }).axe;
      return (await axe.run()).violations.map(({ id, help, nodes }) => ({
        id,
        help,
        nodes: nodes.map((node) => ({ target: node.target })),
      }));
    });
    expect(violations, JSON.stringify(violations, null, 1)).toEqual([]);
  }

  beforeAll(async () => {
    if (!existsSync(chromiumPath)) throw new Error(`no ${chromiumPath}: run scripts/testenv/up.sh browser`);
    [source, destination] = await Promise.all([createTestDatabase('web_src'), createTestDatabase('web_dst')]);
    await source.client.query(`CREATE TABLE orders (id int PRIMARY KEY, item text)`);
    await source.client.query(`INSERT INTO orders SELECT g, 'item ' || g FROM generate_series(1, 100) g`);
    // Fails at its initial load: the destination's notes table holds rows the mirror did not write.
    await source.client.query(`CREATE TABLE notes (id int PRIMARY KEY, body text)`);
    await destination.client.query(`CREATE TABLE notes (id int PRIMARY KEY, body text)`);
    await destination.client.query(`INSERT INTO notes VALUES (1, 'not the mirror''s')`);
    // The chart's history samples /metrics every second, so the test sees it move.
    service = await startStandalone(dataDir, password, { env: { TRIBUTARY_CONSOLE_SAMPLE_SECONDS: '1' } });
    await createRelationalPeers(service, [
      [`src-${suffix}`, source],
      [`dst-${suffix}`, destination],
    ]);
    expect((await createMirror(mirror, 'public.orders')).status).toBe(200);
    expect((await createMirror(broken, 'public.notes')).status).toBe(200);
    await waitFor(async () => (await state(mirror)) === 'STATUS_RUNNING', 60_000, 'running');
    await waitFor(async () => (await state(broken)) === 'STATUS_FAILED', 60_000, 'failed');
    browser = await chromium.launch({
      executablePath: chromiumPath,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
      ],
    });
    const context = await browser.newContext({ httpCredentials: { username: '', password } });
    page = await context.newPage();
    page.on('console', (message) => {
      if (message.text().includes('Content Security Policy')) policyViolations.push(message.text());
    });
    framingSite = createServer((_request, response) => {
      response.setHeader('content-type', 'text/html; charset=utf-8');
      response.end(
        `<!doctype html><title>another site</title><iframe title="console" src="${service.baseUrl}/mirrors/${broken}/confirm?action=drop"></iframe>`,
      );
    });
    await new Promise<void>((resolve) => framingSite.listen(0, '127.0.0.1', resolve));
  });

  afterAll(async () => {
    framingSite?.close();
    await browser?.close();
    await service?.stop();
    await Promise.all([source?.drop(), destination?.drop()]);
  });

  it('shows the running mirror, pauses it with the button, and shows a failed mirror’s error', async () => {
    await source.client.query(`INSERT INTO orders VALUES (1001, 'bread')`);
    await step('list', async () => {
      await page.goto(`${service.baseUrl}/`);
      const row = page.getByRole('row').filter({ hasText: mirror });
      await expect
        .poll(async () => (await shownText(row)).replace(/\s+/g, ' '), { timeout: 30_000 })
        .toMatch(new RegExp(`${mirror} running src-${suffix} → dst-${suffix} .* 101 #\\d+, \\d+ s ago`));
      await expect
        .poll(async () => await shownText(page.getByRole('row').filter({ hasText: broken })))
        .toContain('failed');
      await expectAccessible();
      if (docsScreenshotDir)
        await page.screenshot({ path: join(docsScreenshotDir, 'mirrors.png'), fullPage: true });
    });

    await step('live-list', async () => {
      // htmx refreshes the list in place: a new row at the source shows up without a reload.
      await page.evaluate(() => {
        (globalThis as unknown as { notReloaded: boolean }).notReloaded = true;
      });
      await source.client.query(`INSERT INTO orders VALUES (1002, 'butter')`);
      const row = page.getByRole('row').filter({ hasText: mirror });
      await expect
        .poll(async () => (await shownText(row)).replace(/\s+/g, ' '), { timeout: 45_000 })
        .toContain(' 102 ');
      expect(
        await page.evaluate(() => (globalThis as unknown as { notReloaded?: boolean }).notReloaded),
      ).toBe(true);
    });

    await step('mirror', async () => {
      await page.getByRole('link', { name: mirror }).click();
      await page.waitForURL(`**/mirrors/${mirror}`);
      expect(await shownText(page.getByRole('heading', { level: 1 }))).toBe(`Mirror ${mirror}`);
      expect(await shownText(page.locator('.state').first())).toBe('running');
      expect(await shownText(page.getByRole('row').filter({ hasText: 'public.orders' }))).toMatch(
        /done\s+100/,
      );
      await expectAccessible();
    });

    await step('chart', async () => {
      // uPlot draws the lag and throughput history, and it grows as the console samples /metrics.
      await page.locator('#history-chart .uplot canvas').waitFor({ timeout: 30_000 });
      const points = async () => Number(await page.locator('#history-chart').getAttribute('data-points'));
      const before = await points();
      expect(before).toBeGreaterThan(0);
      await source.client.query(`INSERT INTO orders SELECT g, 'more' FROM generate_series(2000, 2100) g`);
      await expect.poll(points, { timeout: 30_000 }).toBeGreaterThan(before);
      const history = (await (
        await page.request.get(`${service.baseUrl}/mirrors/${mirror}/history.json`)
      ).json()) as { time: number[]; lagBytes: (number | null)[]; rowsPerSecond: (number | null)[] };
      expect(history.lagBytes.some((value) => value !== null)).toBe(true);
      await expect
        .poll(
          async () => {
            const latest = (await (
              await page.request.get(`${service.baseUrl}/mirrors/${mirror}/history.json`)
            ).json()) as {
              rowsPerSecond: (number | null)[];
            };
            return latest.rowsPerSecond.some((value) => value !== null && value > 0);
          },
          { timeout: 30_000 },
        )
        .toBe(true);
      await expectAccessible();
      if (docsScreenshotDir)
        await page.screenshot({ path: join(docsScreenshotDir, 'mirror.png'), fullPage: true });
    });

    await step('table-errored', async () => {
      // One table's fault: the destination refuses a row; the table shows it, then comes back by its Resync button.
      await destination.client.query(
        `ALTER TABLE orders ADD CONSTRAINT short_item CHECK (length(item) < 20)`,
      );
      await source.client.query(`INSERT INTO orders VALUES (3000, repeat('x', 30))`);
      // The tables' row (the log below names the table too).
      const row = page.getByRole('row').filter({ hasText: 'public.orders' }).first();
      const shownAfterReload = async () => {
        await page.reload();
        return shownText(row);
      };
      await expect.poll(shownAfterReload, { timeout: 60_000 }).toContain('errored');
      expect(await shownText(row)).toContain('short_item');
      // The state line says so at the top of the page.
      expect(await shownText(page.locator('#mirror-state'))).toContain('1 table stopped: public.orders');
      await expectAccessible();
      if (docsScreenshotDir)
        await page.screenshot({ path: join(docsScreenshotDir, 'table-errored.png'), fullPage: true });
      await destination.client.query(`ALTER TABLE orders DROP CONSTRAINT short_item`);
      await page.getByRole('button', { name: 'Resync public.orders' }).click();
      await page.waitForURL(`**/mirrors/${mirror}`);
      await expect.poll(shownAfterReload, { timeout: 120_000 }).toMatch(/^\S+\s+\S+\s+streaming/);
      await waitForSameRows(source.client, destination.client, 'orders', 60_000);
    });

    await step('pause', async () => {
      await page.getByRole('link', { name: 'Pause…' }).click();
      await page.waitForURL(`**/mirrors/${mirror}/confirm?action=pause`);
      await expectAccessible();
      // The keyboard reaches the button: focus it and press Enter.
      await page.getByRole('button', { name: `Pause ${mirror}` }).focus();
      await page.keyboard.press('Enter');
      await page.waitForURL(`**/mirrors/${mirror}`);
      await waitFor(async () => (await state(mirror)) === 'STATUS_PAUSED', 60_000, 'paused');
      // No reload: htmx swaps in the state part of the page as it changes.
      await expect
        .poll(async () => await shownText(page.locator('.state').first()), { timeout: 30_000 })
        .toBe('paused');
      expect(await page.getByRole('link', { name: 'Resume…' }).count()).toBe(1);
    });

    await step('peers', async () => {
      await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'peers' }).click();
      await page.waitForURL('**/peers');
      const row = page.getByRole('row').filter({ hasText: `src-${suffix}` });
      expect((await shownText(row)).replace(/\s+/g, ' ')).toMatch(/relational 1\d\.\d+.*"password":"\*{8}"/);
      await expectAccessible();
      if (docsScreenshotDir)
        await page.screenshot({ path: join(docsScreenshotDir, 'peers.png'), fullPage: true });
    });

    await step('peer-form', async () => {
      await page.getByRole('link', { name: 'New peer' }).click();
      await page.waitForURL('**/new/peer');
      await page.getByLabel('Name (required)').fill(`third-${suffix}`);
      await page.getByLabel('host (required)').fill(source.config.host);
      await page.getByLabel('port (required)').fill(String(source.config.port));
      await page.getByLabel('user (required)').fill(source.config.user);
      await page.getByLabel('password (required)').fill(source.config.password);
      await page.getByLabel('database (required)').fill(source.config.database);
      await page.getByRole('button', { name: 'Test connection' }).click();
      expect(await shownText(page.getByRole('status'))).toMatch(/can be reached/);
      // A checked form comes back without its secret: typed again to save.
      expect(await page.getByLabel('password (required)').inputValue()).toBe('');
      await expectAccessible();
      if (docsScreenshotDir)
        await page.screenshot({ path: join(docsScreenshotDir, 'peer-form.png'), fullPage: true });
      await page.getByLabel('password (required)').fill(source.config.password);
      await page.getByRole('button', { name: 'Save' }).click();
      await page.waitForURL(`**/peers/third-${suffix}`);
      await expectAccessible();
    });

    await step('mirror-form', async () => {
      await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'mirrors' }).click();
      await page.getByRole('link', { name: 'New mirror' }).click();
      await page.getByLabel('Name').fill(`picked-${suffix}`);
      await page.getByLabel('Source (PostgreSQL)').selectOption(`src-${suffix}`);
      await page.getByLabel('Destination').selectOption(`dst-${suffix}`);
      await page.getByRole('button', { name: 'Next: choose tables' }).click();
      await page.getByLabel('replicate public.orders').check();
      await page.getByLabel('destination of public.orders').fill('public.orders_picked');
      await expectAccessible();
      if (docsScreenshotDir)
        await page.screenshot({ path: join(docsScreenshotDir, 'mirror-form.png'), fullPage: true });
      await page.getByRole('button', { name: 'Create the mirror' }).click();
      await page.waitForURL(`**/mirrors/picked-${suffix}`);
      await waitFor(
        async () => (await state(`picked-${suffix}`)) === 'STATUS_RUNNING',
        60_000,
        'the picked mirror running',
      );
      await expectAccessible();
    });

    await step('script', async () => {
      await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'scripts' }).click();
      await page.waitForURL('**/scripts');
      await page.getByRole('link', { name: 'New script' }).click();
      await page.getByLabel('Name').fill(`shaper_${suffix}`);
      await page.getByLabel('Lua source').fill('function onRecord(record)\n  record.new.item = \nend\n');
      await page.getByRole('button', { name: 'Save' }).click();
      expect(await shownText(page.getByRole('alert'))).toContain(`does not compile: shaper_${suffix}:3:`);
      await expectAccessible();
      if (docsScreenshotDir)
        await page.screenshot({ path: join(docsScreenshotDir, 'script.png'), fullPage: true });
      await page
        .getByLabel('Lua source')
        .fill(
          'function onRecord(record)\n  record.new.item = string.upper(record.new.item)\n  return record\nend\n',
        );
      await page.getByRole('button', { name: 'Save' }).click();
      await page.waitForURL(/\/scripts\/\d+\?saved=1$/);
      expect(await shownText(page.getByRole('status'))).toBe('Saved.');
    });

    await step('logs', async () => {
      await page.goto(`${service.baseUrl}/mirrors/${broken}`);
      expect(await shownText(page.locator('.state').first())).toBe('failed');
      await page.getByLabel('Level').selectOption('ERROR');
      await page.getByRole('button', { name: 'Show' }).click();
      await page.waitForURL(/level=ERROR/);
      const logRows = page.locator('#logs ~ table tbody tr');
      expect(await logRows.count()).toBeGreaterThan(0);
      expect(await shownText(logRows.first())).toMatch(
        /error\s+destination table\(s\) \S*notes\S* already hold rows/,
      );
      await expectAccessible();
      if (docsScreenshotDir)
        await page.screenshot({ path: join(docsScreenshotDir, 'logs.png'), fullPage: true });
    });

    await step('no-policy-violations', async () => {
      // htmx, the chart and the forms above all worked under the policy, and nothing was refused.
      expect(policyViolations).toEqual([]);
    });
  });

  it('renders nothing in a frame of another site', async () => {
    // The same browser, logged in to the console, as a victim would be: without
    // the headers the frame would show the drop button with the stored credentials.
    const framing = await page.context().newPage();
    try {
      const confirmUrl = `${service.baseUrl}/mirrors/${broken}/confirm?action=drop`;
      await framing.goto(confirmUrl);
      expect(await framing.getByRole('button', { name: `Drop mirror ${broken}` }).count()).toBe(1);
      expect(await shownText(framing.locator('main'))).toContain('public.notes');

      const { port } = framingSite.address() as AddressInfo;
      const refusals: string[] = [];
      framing.on('console', (message) => refusals.push(message.text()));
      await framing.goto(`http://127.0.0.1:${port}/`, { waitUntil: 'load' });
      const frame = framing.frames().find((candidate) => candidate !== framing.mainFrame());
      expect(frame).toBeDefined();
      await expect.poll(() => refusals.join('\n')).toContain("frame-ancestors 'none'");
      expect(await frame?.getByRole('button', { name: `Drop mirror ${broken}` }).count()).toBe(0);
      expect(await frame?.getByRole('navigation', { name: 'Console' }).count()).toBe(0);
    } finally {
      await framing.close();
    }
  });
});

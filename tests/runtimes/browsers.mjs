// The three browser engines the tests drive, behind one small interface:
// Chromium (V8; Debian's chromium through playwright-core), Firefox
// (SpiderMonkey; Debian's firefox-esr through puppeteer-core over WebDriver
// BiDi) and WebKit (JavaScriptCore; the MiniBrowser of Debian's WebKitGTK
// through its WebKitWebDriver and selenium-webdriver, under a virtual display
// from xvfb-run, since MiniBrowser has no headless mode).
//
//   const browser = await launchBrowser('firefox');  // or a { skip } saying why not
//   const page = await browser.open(url);
//   await page.evaluate('async (arg) => ...', arg);   // a function's source, run in the page
//   await page.click('#start'); await page.fill('#speed', '200');
//   await page.screenshot(path); page.problems();     // console errors and page errors seen
//   page.warnings(); await page.close();              // console warnings seen; the page closed
//   await browser.close();
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
/** Where Debian's chromium lives, and the flags every test launches it with. */
export const CHROMIUM = '/usr/bin/chromium';
export const CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
export const FIREFOX = '/usr/bin/firefox-esr';
export const WEBKIT_DRIVER = '/usr/bin/WebKitWebDriver';
export const MINIBROWSER = '/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser';
export const XVFB_RUN = '/usr/bin/xvfb-run';
export const BROWSERS = ['chromium', 'firefox', 'webkit'];

async function importOrNull(name) {
  try {
    return await import(name);
  } catch {
    return null;
  }
}

/** Why `name` cannot run here, or null. */
export async function browserMissing(name) {
  if (name === 'chromium') {
    if (!existsSync(CHROMIUM)) return `Chromium is not installed at ${CHROMIUM} (Debian package chromium)`;
    if (!(await importOrNull('playwright-core'))) return 'playwright-core is not installed (npm ci)';
  } else if (name === 'firefox') {
    if (!existsSync(FIREFOX)) return `Firefox is not installed at ${FIREFOX} (Debian package firefox-esr)`;
    if (!(await importOrNull('puppeteer-core'))) return 'puppeteer-core is not installed (npm ci)';
  } else if (name === 'webkit') {
    if (!existsSync(WEBKIT_DRIVER) || !existsSync(MINIBROWSER)) {
      return `WebKitGTK's WebDriver and MiniBrowser are not installed (Debian package webkit2gtk-driver)`;
    }
    if (!existsSync(XVFB_RUN)) return 'xvfb-run is not installed (Debian package xvfb): MiniBrowser needs a display';
    if (!(await importOrNull('selenium-webdriver'))) return 'selenium-webdriver is not installed (npm ci)';
  } else {
    return `no browser named ${name}`;
  }
  return null;
}

// Runs `source`, the source of an async function of one argument, in a page.
const wrapped = (source) => `(${source})`;

/** What a page reports that a test must see: console errors, page errors and HTTP errors,
 * and apart, console warnings (Playwright says 'warning', Puppeteer 'warn'; they name
 * the other events alike). */
function watchProblems(page) {
  const problems = [];
  const warnings = [];
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console: ${m.text()}`);
    if (m.type() === 'warning' || m.type() === 'warn') warnings.push(`console warning: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('response', (r) => r.status() >= 400 && problems.push(`HTTP ${r.status()}: ${r.url()}`));
  return { problems, warnings };
}

async function chromium() {
  const { chromium: driver } = await import('playwright-core');
  const browser = await driver.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS });
  return {
    version: `Chromium ${browser.version()}`,
    async open(url, { width = 1400, height = 1100 } = {}) {
      const page = await browser.newPage({ viewport: { width, height } });
      const { problems, warnings } = watchProblems(page);
      await page.goto(url);
      return {
        evaluate: (source, arg) => page.evaluate(({ source: s, arg: a }) => (0, eval)(s)(a), { source: wrapped(source), arg }),
        click: (selector) => page.locator(selector).click(),
        fill: (selector, value) => page.locator(selector).fill(value),
        select: (selector, value) => page.selectOption(selector, value),
        check: (selector) => page.locator(selector).check(),
        // Chromium only: the page's File is the file on disk, not a copy in memory.
        setInputFiles: (selector, paths) => page.locator(selector).setInputFiles(paths),
        screenshot: (path) => page.screenshot({ path, fullPage: true }),
        problems: () => problems.slice(),
        warnings: () => warnings.slice(),
        close: () => page.close(),
      };
    },
    close: () => browser.close(),
  };
}

async function firefox() {
  const puppeteer = (await import('puppeteer-core')).default;
  const profile = mkdtempSync(join(tmpdir(), 'kvcache-firefox-'));
  const browser = await puppeteer.launch({
    browser: 'firefox', executablePath: FIREFOX, headless: true, userDataDir: profile,
    protocolTimeout: 180000,
  });
  const version = await browser.version();
  return {
    version: version.startsWith('firefox') ? `Firefox ${version.split('/')[1] ?? version}` : version,
    async open(url, { width = 1400, height = 1100 } = {}) {
      const page = await browser.newPage();
      await page.setViewport({ width, height });
      const { problems, warnings } = watchProblems(page);
      await page.goto(url);
      return {
        evaluate: (source, arg) => page.evaluate((s, a) => (0, eval)(s)(a), wrapped(source), arg),
        click: (selector) => page.click(selector),
        fill: (selector, value) => page.$eval(selector, (el, v) => {
          el.value = v;
          el.dispatchEvent(new Event('input', { bubbles: true }));
          el.dispatchEvent(new Event('change', { bubbles: true }));
        }, value),
        select: (selector, value) => page.select(selector, value),
        check: (selector) => page.$eval(selector, (el) => { if (!el.checked) el.click(); }),
        screenshot: (path) => page.screenshot({ path, fullPage: true }),
        problems: () => problems.slice(),
        warnings: () => warnings.slice(),
        close: () => page.close(),
      };
    },
    async close() {
      await browser.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function webkit() {
  const { Builder, Capabilities } = await import('selenium-webdriver');
  const port = await freePort();
  // The driver, and the MiniBrowser it starts, on a virtual display.
  // A locale: under LANG=C WebKitGTK reports navigator.language 'C', which
  // Intl rejects (uPlot formats numbers with it).
  const driverProcess = spawn(XVFB_RUN, ['-a', WEBKIT_DRIVER, `--port=${port}`],
    { stdio: 'ignore', detached: true, env: { ...process.env, LANG: 'en_US.UTF-8', LANGUAGE: 'en_US', LC_ALL: 'en_US.UTF-8' } });
  const stop = () => { try { process.kill(-driverProcess.pid, 'SIGTERM'); } catch { /* gone already */ } };
  let session;
  try {
    const capabilities = new Capabilities({
      browserName: 'MiniBrowser',
      'webkitgtk:browserOptions': { binary: MINIBROWSER, args: ['--automation'] },
    });
    const started = Date.now();
    for (;;) {
      try {
        session = await new Builder().usingServer(`http://127.0.0.1:${port}`).withCapabilities(capabilities).build();
        break;
      } catch (error) {
        if (Date.now() - started > 30000) throw error;
        await new Promise((r) => setTimeout(r, 300));
      }
    }
  } catch (error) {
    stop();
    throw error;
  }
  const caps = await session.getCapabilities();
  await session.manage().setTimeouts({ script: 180000 });
  return {
    version: `WebKitGTK ${caps.get('browserVersion') ?? ''}`.trim(),
    async open(url, { width = 1400, height = 1100 } = {}) {
      await session.manage().window().setRect({ width, height }).catch(() => {});
      // WebKitWebDriver has no console log: the page's own record of errors.
      await session.get(url);
      const run = (source, arg) => session.executeAsyncScript(
        `const done = arguments[arguments.length - 1];
         Promise.resolve().then(() => (0, eval)(arguments[0])(arguments[1]))
           .then((value) => done({ value }), (error) => done({ error: error instanceof Error ? error.name + ': ' + error.message + '\\n' + error.stack : String(error) }));`,
        wrapped(source), arg);
      // get() may return while the page's module scripts still load.
      await run(`async () => {
        if (document.readyState !== 'complete') await new Promise((resolve) => addEventListener('load', resolve, { once: true }));
      }`);
      return {
        async evaluate(source, arg) {
          const { value, error } = await run(source, arg);
          if (error !== undefined) throw new Error(error);
          return value;
        },
        // WebKitWebDriver delivers a click through the UI process and may
        // answer before the page has handled it; a click from script is
        // handled before the next evaluate, as the other drivers' are.
        click: (selector) => run(`async (s) => document.querySelector(s).click()`, selector),
        fill: (selector, value) => run(`async ([s, v]) => {
          const el = document.querySelector(s); el.value = v;
          el.dispatchEvent(new Event('input', { bubbles: true })); el.dispatchEvent(new Event('change', { bubbles: true }));
        }`, [selector, value]),
        select: (selector, value) => run(`async ([s, v]) => {
          const el = document.querySelector(s); el.value = v; el.dispatchEvent(new Event('change', { bubbles: true }));
        }`, [selector, value]),
        check: (selector) => run(`async (s) => { const el = document.querySelector(s); if (!el.checked) el.click(); }`, selector),
        async screenshot(path) {
          writeFileSync(path, Buffer.from(await session.takeScreenshot(), 'base64'));
        },
        problems: () => [],
        warnings: () => [],
        close: async () => {},
      };
    },
    async close() {
      await session.quit().catch(() => {});
      stop();
    },
  };
}

/** Starts browser `name`: { version, open(url), close() }. Call browserMissing first. */
export function launchBrowser(name) {
  return { chromium, firefox, webkit }[name]();
}

#!/usr/bin/env node
// Opens a self-contained HTML report in real headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core), watches what it does, runs a list of actions and prints ONE JSON object on stdout.
//
//   node tests/browser/inspect_report.mjs --report PATH --actions JSON
//        [--ready-timeout-ms 30000] [--action-timeout-ms 5000] [--viewport 1280x900]
//
// --actions is a JSON array (or @FILE holding one). Actions, run in order:
//   {"do": "count",  "selector": CSS}                      -> number of matching elements (no waiting)
//   {"do": "text",   "selector": CSS}                      -> textContent of the first match
//   {"do": "texts",  "selector": CSS, "limit": n}          -> textContent of the first n matches (all if no limit)
//   {"do": "click",  "selector": CSS}                      -> null   (the first match; a real mouse click)
//   {"do": "fill",   "selector": CSS, "value": str}        -> null   (fires `input`, not `change`)
//   {"do": "select", "selector": CSS, "value": str}        -> [selected option values] (by value, else label;
//                                                              fires `input` and `change`)
//   {"do": "press",  "selector": CSS, "key": "Enter"}      -> null   (focus the first match, press a key)
//   {"do": "mouse",  "selector": CSS, "points": [[x, y], ...], "modifiers": ["Shift"]}
//                                                          -> null   (real mouse, points relative to the first
//                                                              match's top left corner: one point clicks there;
//                                                              more press at the first, move through the others
//                                                              and release at the last; modifiers held throughout;
//                                                              the match is scrolled into view first)
//   {"do": "open",   "fragment": "#a=1"}                   -> null   (load the report again, from a blank page, at
//                                                              its URL with this fragment; waits for
//                                                              window.__reportReady up to the ready timeout)
//   {"do": "eval",   "expression": JS}                     -> JSON value of a page expression (promises awaited;
//                                                              undefined -> null)
//   {"do": "screenshot", "path": PNG, "full_page": true}   -> the path written
//   {"do": "wait",   "ms": n}                              -> null   (sleep)
//   {"do": "wait",   "selector": CSS, "state": "visible"}  -> null   (until the first match is attached|detached|
//                                                              visible|hidden)
// text/texts/click/fill/select/press/wait-for-selector wait for their element up to the action timeout
// ("timeout_ms" on the action, else --action-timeout-ms); count and eval never wait.
//
// Out: {"console_errors": [{"type": "error"|"warning", "text", "url", "line"}],
//       "page_errors":    [{"message", "stack"}],            uncaught exceptions and unhandled rejections
//       "dialogs":        [{"type": "alert"|"confirm"|"prompt"|"beforeunload", "message"}],  all dismissed
//       "requests":       [{"url", "method", "resource_type"}],  every request but the report itself,
//                                                          other file:// URLs and websockets included; all
//                                                          but file:// are aborted, none leaves the machine.
//                                                          data:/blob: URLs are no requests: Playwright
//                                                          reports none, and any it did would be skipped.
//       "ready_ms": n | null,     navigation start -> window.__reportReady === true (performance.now() in the
//                                 page, so polling adds nothing); null if it never became true
//       "ready_error": str | null,   why ready_ms is null (navigation failure or timeout)
//       "launch_ms": n,              how long Chromium took to start
//       "results": [{"ok": bool, "value": any, "error": str | null}]}   one per action, in order
// A failing action does not stop the run. Exit 0 whenever the JSON was printed; 2 for usage errors
// (bad arguments, unknown action, missing report); 1 if Chromium could not be driven at all (stderr says why).
//
// CHROMIUM_PATH overrides /usr/bin/chromium. Playwright's own browser downloads are never used.

import { existsSync, readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const USAGE =
    'usage: node inspect_report.mjs --report PATH --actions JSON|@FILE ' +
    '[--ready-timeout-ms N] [--action-timeout-ms N] [--viewport WxH]';

const CHROMIUM_ARGS = [
    '--no-sandbox', // we run as root (CI too): Chromium refuses its sandbox as root
    '--disable-gpu',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--no-first-run',
    '--disable-quic',
    '--disable-dev-shm-usage', // containers often have a 64 MB /dev/shm; Debian's wrapper test for it is fragile
];

function usageError(message) {
    process.stderr.write(`inspect_report.mjs: ${message}\n${USAGE}\n`);
    process.exit(2);
}

function positiveInt(name, text, fallback) {
    if (text === undefined) {
        return fallback;
    }
    const n = Number(text);
    if (!Number.isInteger(n) || n <= 0) {
        usageError(`${name} must be a positive integer, got ${JSON.stringify(text)}`);
    }
    return n;
}

const NEEDS = {
    count: { selector: 'string' },
    text: { selector: 'string' },
    texts: { selector: 'string' },
    click: { selector: 'string' },
    fill: { selector: 'string', value: 'string' },
    select: { selector: 'string', value: 'string' },
    press: { selector: 'string', key: 'string' },
    mouse: { selector: 'string' },
    open: { fragment: 'string' },
    eval: { expression: 'string' },
    screenshot: { path: 'string' },
    wait: {},
};
const WAIT_STATES = new Set(['attached', 'detached', 'visible', 'hidden']);

function checkActions(actions) {
    if (!Array.isArray(actions)) {
        usageError('--actions must be a JSON array');
    }
    actions.forEach((action, i) => {
        const where = `action ${i} (${JSON.stringify(action)})`;
        if (action === null || typeof action !== 'object' || Array.isArray(action)) {
            usageError(`${where} is not an object`);
        }
        const needs = NEEDS[action.do];
        if (!needs) {
            usageError(`${where}: unknown "do"; known: ${Object.keys(NEEDS).join(', ')}`);
        }
        for (const [key, type] of Object.entries(needs)) {
            if (typeof action[key] !== type) {
                usageError(`${where}: "${key}" must be a ${type}`);
            }
        }
        if (action.do === 'wait') {
            const hasMs = action.ms !== undefined;
            const hasSelector = action.selector !== undefined;
            if (hasMs === hasSelector) {
                usageError(`${where}: wait takes either "ms" or "selector"`);
            }
            if (hasMs && !(Number.isFinite(action.ms) && action.ms >= 0)) {
                usageError(`${where}: "ms" must be a number >= 0`);
            }
            if (hasSelector && typeof action.selector !== 'string') {
                usageError(`${where}: "selector" must be a string`);
            }
            if (action.state !== undefined && !WAIT_STATES.has(action.state)) {
                usageError(`${where}: "state" must be one of ${[...WAIT_STATES].join(', ')}`);
            }
        }
        if (action.do === 'mouse') {
            const point = (p) => Array.isArray(p) && p.length === 2 && p.every(Number.isFinite);
            if (!Array.isArray(action.points) || action.points.length === 0 || !action.points.every(point)) {
                usageError(`${where}: "points" must be a non-empty array of [x, y] numbers`);
            }
            const known = ['Alt', 'Control', 'Meta', 'Shift'];
            if (action.modifiers !== undefined && !(Array.isArray(action.modifiers) && action.modifiers.every((m) => known.includes(m)))) {
                usageError(`${where}: "modifiers" must be an array of ${known.join(', ')}`);
            }
        }
        if (action.limit !== undefined && !(Number.isInteger(action.limit) && action.limit >= 0)) {
            usageError(`${where}: "limit" must be an integer >= 0`);
        }
        if (action.timeout_ms !== undefined && !(Number.isInteger(action.timeout_ms) && action.timeout_ms > 0)) {
            usageError(`${where}: "timeout_ms" must be a positive integer`);
        }
    });
    return actions;
}

function parseCli() {
    let values;
    try {
        ({ values } = parseArgs({
            options: {
                report: { type: 'string' },
                actions: { type: 'string' },
                'ready-timeout-ms': { type: 'string' },
                'action-timeout-ms': { type: 'string' },
                viewport: { type: 'string' },
            },
            strict: true,
            allowPositionals: false,
        }));
    } catch (err) {
        usageError(err.message);
    }
    if (!values.report) {
        usageError('--report is required');
    }
    const report = resolve(values.report);
    if (!existsSync(report) || !statSync(report).isFile()) {
        usageError(`no such file: ${report}`);
    }
    let actionsText = values.actions ?? '[]';
    if (actionsText.startsWith('@')) {
        try {
            actionsText = readFileSync(actionsText.slice(1), 'utf8');
        } catch (err) {
            usageError(`cannot read ${actionsText}: ${err.message}`);
        }
    }
    let actions;
    try {
        actions = JSON.parse(actionsText);
    } catch (err) {
        usageError(`--actions is not JSON: ${err.message}`);
    }
    let viewport = { width: 1280, height: 900 };
    if (values.viewport !== undefined) {
        const m = /^(\d+)x(\d+)$/.exec(values.viewport);
        if (!m) {
            usageError('--viewport must look like 1280x900');
        }
        viewport = { width: Number(m[1]), height: Number(m[2]) };
    }
    return {
        report,
        actions: checkActions(actions),
        readyTimeoutMs: positiveInt('--ready-timeout-ms', values['ready-timeout-ms'], 30_000),
        actionTimeoutMs: positiveInt('--action-timeout-ms', values['action-timeout-ms'], 5_000),
        viewport,
    };
}

// Runs before any script of every document: records when window.__reportReady first becomes true, in
// performance.now() terms (0 = navigation start), without changing what the page reads back.
function readyProbe() {
    let value;
    Object.defineProperty(window, '__reportReady', {
        configurable: true,
        enumerable: true,
        get() {
            return value;
        },
        set(v) {
            value = v;
            if (v === true && window.__inspectReadyAt === undefined) {
                Object.defineProperty(window, '__inspectReadyAt', { value: performance.now() });
            }
        },
    });
}

function errorText(err) {
    const text = err && err.message ? err.message : String(err);
    // Playwright appends a call log in terminal colours; its first entry names the locator.
    const lines = text
        .replace(/\u001b\[[0-9;]*m/g, '')
        .split('\n')
        .map((line) => line.trim())
        .filter((line) => line && line !== 'Call log:');
    return lines.slice(0, 3).join('\n');
}

function jsonValue(v) {
    return v === undefined ? null : v;
}

const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

async function mouse(page, action, timeout) {
    const target = page.locator(action.selector).first();
    await target.waitFor({ state: 'visible', timeout });
    await target.scrollIntoViewIfNeeded({ timeout });
    const box = await target.boundingBox({ timeout });
    if (box === null) {
        throw new Error(`${action.selector} has no box on the page`);
    }
    const at = ([x, y]) => [box.x + x, box.y + y];
    const modifiers = action.modifiers ?? [];
    for (const key of modifiers) {
        await page.keyboard.down(key);
    }
    try {
        const [first, ...rest] = action.points.map(at);
        await page.mouse.move(...first);
        await page.mouse.down();
        for (const point of rest) {
            await page.mouse.move(...point, { steps: 5 });
        }
        await page.mouse.up();
    } finally {
        for (const key of modifiers.reverse()) {
            await page.keyboard.up(key);
        }
    }
}

async function open(page, url, readyTimeoutMs) {
    // From a blank page: only a fragment's change would not load the document again.
    await page.goto('about:blank');
    await page.goto(url, { waitUntil: 'commit', timeout: readyTimeoutMs });
    await page.waitForFunction(() => window.__reportReady === true, null, { timeout: readyTimeoutMs, polling: 50 });
}

async function runAction(page, action, actionTimeoutMs, context) {
    const timeout = action.timeout_ms ?? actionTimeoutMs;
    const first = () => page.locator(action.selector).first();
    switch (action.do) {
        case 'count':
            return page.locator(action.selector).count();
        case 'text':
            return first().textContent({ timeout });
        case 'texts': {
            const all = page.locator(action.selector);
            if (action.limit !== 0) {
                await all.first().waitFor({ state: 'attached', timeout });
            }
            const texts = await all.allTextContents();
            return action.limit === undefined ? texts : texts.slice(0, action.limit);
        }
        case 'click':
            await first().click({ timeout });
            return null;
        case 'fill':
            await first().fill(action.value, { timeout });
            return null;
        case 'select':
            return first().selectOption(action.value, { timeout });
        case 'press':
            await first().press(action.key, { timeout });
            return null;
        case 'mouse':
            await mouse(page, action, timeout);
            return null;
        case 'open':
            await open(page, context.reportUrl + action.fragment, context.readyTimeoutMs);
            return null;
        case 'eval':
            return jsonValue(await page.evaluate(action.expression));
        case 'screenshot':
            await page.screenshot({ path: resolve(action.path), fullPage: action.full_page ?? true, timeout });
            return resolve(action.path);
        case 'wait':
            if (action.selector !== undefined) {
                await first().waitFor({ state: action.state ?? 'visible', timeout });
            } else {
                await sleep(action.ms);
            }
            return null;
        default:
            throw new Error(`unknown action ${action.do}`); // checkActions already refused it
    }
}

async function main() {
    const opts = parseCli();
    // Imported only after the arguments are checked, so usage errors need no node_modules.
    let chromium;
    try {
        ({ chromium } = await import('playwright-core'));
    } catch (err) {
        process.stderr.write(
            `inspect_report.mjs: cannot load playwright-core (${err.message}); run \`make test\` ` +
                '(it runs `npm ci` in tests/browser)\n',
        );
        process.exit(1);
    }
    const executablePath = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
    if (!existsSync(executablePath)) {
        process.stderr.write(
            `inspect_report.mjs: ${executablePath} is missing; run \`make test\` (it installs Debian's chromium)\n`,
        );
        process.exit(1);
    }

    const reportUrl = pathToFileURL(opts.report).href;
    const out = {
        console_errors: [],
        page_errors: [],
        dialogs: [],
        requests: [],
        ready_ms: null,
        ready_error: null,
        launch_ms: null,
        results: [],
    };

    const launchStart = performance.now();
    const browser = await chromium.launch({ executablePath, headless: true, args: CHROMIUM_ARGS });
    out.launch_ms = Math.round(performance.now() - launchStart);
    try {
        const context = await browser.newContext({ viewport: opts.viewport, serviceWorkers: 'block' });
        const isLocal = (url) => url.startsWith('data:') || url.startsWith('blob:');
        const isReport = (url) => url.split('#')[0] === reportUrl;

        // Nothing leaves the machine: every non-file request is aborted (it is still recorded below).
        await context.route(
            (url) => url.protocol !== 'file:' && url.protocol !== 'data:' && url.protocol !== 'blob:',
            (route) => route.abort('blockedbyclient'),
        );
        // A routed websocket never reaches a server and raises no 'websocket' event: record it here.
        await context.routeWebSocket(/.*/, (ws) => {
            out.requests.push({ url: ws.url(), method: 'GET', resource_type: 'websocket' });
            ws.close({ code: 1008, reason: 'blocked by inspect_report' });
        });
        context.on('request', (request) => {
            const url = request.url();
            if (!isLocal(url) && !isReport(url)) {
                out.requests.push({ url, method: request.method(), resource_type: request.resourceType() });
            }
        });
        const watch = (page) => {
            page.on('console', (msg) => {
                if (msg.type() === 'error' || msg.type() === 'warning') {
                    const loc = msg.location();
                    out.console_errors.push({
                        type: msg.type(),
                        text: msg.text(),
                        url: loc.url || null,
                        line: loc.lineNumber ?? null,
                    });
                }
            });
            page.on('pageerror', (err) => {
                out.page_errors.push({ message: err.message, stack: err.stack ?? null });
            });
            page.on('crash', () => {
                out.page_errors.push({ message: 'page crashed', stack: null });
            });
            page.on('dialog', (dialog) => {
                out.dialogs.push({ type: dialog.type(), message: dialog.message() });
                dialog.dismiss().catch(() => {});
            });
        };
        context.on('page', watch); // popups (window.open, target=_blank) too
        await context.addInitScript(readyProbe);
        const page = await context.newPage();

        const navStart = performance.now();
        const deadline = navStart + opts.readyTimeoutMs;
        try {
            await page.goto(reportUrl, { waitUntil: 'commit', timeout: opts.readyTimeoutMs });
            const left = Math.max(1, Math.round(deadline - performance.now()));
            await page.waitForFunction(() => window.__reportReady === true, null, { timeout: left, polling: 50 });
            const inPage = await page.evaluate(() => window.__inspectReadyAt);
            out.ready_ms =
                typeof inPage === 'number'
                    ? Math.round(inPage * 10) / 10
                    : Math.round(performance.now() - navStart); // probe defeated by the page: wall clock
        } catch (err) {
            out.ready_error = `window.__reportReady did not become true within ${opts.readyTimeoutMs} ms: ${errorText(err)}`;
        }

        for (const action of opts.actions) {
            try {
                const value = await runAction(page, action, opts.actionTimeoutMs, {
                    reportUrl,
                    readyTimeoutMs: opts.readyTimeoutMs,
                });
                out.results.push({ ok: true, value: jsonValue(value), error: null });
            } catch (err) {
                out.results.push({ ok: false, value: null, error: errorText(err) });
            }
        }
        // Let events raised by the last action (console, requests) arrive before reporting.
        await sleep(50);
    } finally {
        await browser.close().catch(() => {});
    }
    process.stdout.write(`${JSON.stringify(out)}\n`);
}

main().catch((err) => {
    process.stderr.write(`inspect_report.mjs: ${err && err.stack ? err.stack : err}\n`);
    process.exit(1);
});

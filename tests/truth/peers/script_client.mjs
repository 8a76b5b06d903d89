#!/usr/bin/env node
// One client process of the truth corpus's held-out family (tests/truth/family_holdout.py): the official
// TypeScript SDK client (tests/clients/ts/node_modules), run as a process of its own, driving a script of
// labelled tools/calls the way tests/truth/process_client.py does for the Python SDK.
//
//   node tests/truth/peers/script_client.mjs --url URL/mcp --script JSON [--start-at EPOCH] [--timeout-ms N]
//
// The script is a list of calls, run in order in one session (Client + StreamableHTTPClientTransport):
//
//   {"tool": NAME, "args": {...}, "label": {...}, "progress": false, "timeout_ms": N, "pause": SECONDS,
//    "retry": {"times": 1, "delay": 0.5, "retry_after": false, "new_session": true, "origin": "app-retry",
//              "reexecutes": false, "rerun": [call, ...]}}
//
// "pause" waits before the call (a user's next action). When a call fails (the SDK throws: an HTTP error, a
// cut stream, a timeout; not isError) and has a "retry", the client waits "delay" seconds, or with
// "retry_after" what the failed POST's Retry-After header said, and sends it again, up to "times" times, each
// under the next attempt's label (kind retry, the origin and reexecutes given): in the same session, or after
// closing it, in a new session (a new Client and transport in this process), where before the first retry it
// runs "rerun". The calls after it run in whichever session is open. --start-at holds the first call until
// the epoch time T, once the session is open. The label goes in params._meta.truth.
// stdout: ONE JSON object {"pid", "sdk_version", "attempts": [{label, tool, arguments, outcome, error, t_start,
// t_end}], "wire": [{method, status, retry_after, session}]}, outcome "ok" | "tool-error" | "error".

import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const SDK_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'clients', 'ts', 'node_modules', '@modelcontextprotocol', 'sdk');
const sdk = async (path) => import(pathToFileURL(join(SDK_DIR, 'dist', 'esm', path)).href);
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const SDK_VERSION = JSON.parse(readFileSync(join(SDK_DIR, 'package.json'), 'utf8')).version;

const { values: args } = parseArgs({
    options: {
        url: { type: 'string' },
        script: { type: 'string' },
        'start-at': { type: 'string' },
        'timeout-ms': { type: 'string', default: '10000' }
    }
});
const URL_ = new URL(args.url);
const SCRIPT = JSON.parse(args.script);
let startAt = args['start-at'] ? Number(args['start-at']) : null;
const TIMEOUT_MS = Number(args['timeout-ms']);

const attempts = [];
const wire = [];
let lastRetryAfter = null; // the Retry-After of the last POST answered

const now = () => Date.now() / 1000;
const sleep = (seconds) => new Promise((resolve) => setTimeout(resolve, Math.max(0, seconds) * 1000));
const log = (line) => process.stderr.write(`[script-client ${process.pid} ${now().toFixed(3)}] ${line}\n`);

async function loggedFetch(input, init = {}) {
    const method = init.method ?? 'GET';
    const headers = new Headers(init.headers ?? undefined);
    const entry = { method, status: null, retry_after: null, session: headers.get('mcp-session-id') };
    wire.push(entry);
    try {
        const response = await fetch(input, init);
        entry.status = response.status;
        entry.retry_after = response.headers.get('retry-after');
        if (method === 'POST') lastRetryAfter = entry.retry_after;
        return response;
    } catch (error) {
        entry.status = `failed: ${error?.message ?? error}`;
        throw error;
    }
}

async function openSession() {
    const transport = new StreamableHTTPClientTransport(URL_, { fetch: loggedFetch });
    const client = new Client({ name: 'mcp-blackbox-truth-holdout', version: '0.1.0' }, { capabilities: {} });
    client.onerror = (error) => log(`transport/protocol error: ${error?.message ?? error}`);
    await client.connect(transport, { timeout: TIMEOUT_MS });
    return client;
}

async function closeSession(client) {
    await client.close().catch((error) => log(`close failed: ${error?.message ?? error}`));
}

function retryLabel(previous, retry) {
    return {
        request: previous.request,
        attempt: previous.attempt + 1,
        kind: 'retry',
        origin: retry.origin ?? null,
        reexecutes: Boolean(retry.reexecutes)
    };
}

async function call(client, step) {
    const record = { label: step.label, tool: step.tool, arguments: step.args ?? {}, outcome: 'error', error: null };
    const options = { timeout: step.timeout_ms ?? TIMEOUT_MS };
    if (step.progress) {
        options.onprogress = () => {};
        options.resetTimeoutOnProgress = true;
    }
    record.t_start = now();
    lastRetryAfter = null;
    try {
        const result = await client.callTool(
            { name: step.tool, arguments: step.args ?? {}, _meta: { truth: step.label } },
            undefined,
            options
        );
        record.outcome = result.isError ? 'tool-error' : 'ok';
    } catch (error) {
        record.error = `${error?.constructor?.name ?? 'Error'}: ${error?.message ?? error}`;
    }
    record.t_end = now();
    attempts.push(record);
    return record;
}

/** Run calls in one session until one fails with a retry in a new session; return what is left. */
async function inOneSession(pending) {
    const client = await openSession();
    try {
        if (startAt !== null) {
            await sleep(startAt - now());
            startAt = null;
        }
        while (pending.length) {
            const step = pending.shift();
            if (step.pause) await sleep(step.pause);
            const attempt = await call(client, step);
            const retry = step.retry;
            if (attempt.outcome !== 'error' || !retry || !(retry.times ?? 1)) continue;
            const told = retry.retry_after && lastRetryAfter !== null ? Number(lastRetryAfter) : null;
            await sleep(told ?? retry.delay ?? 0);
            const again = {
                ...step,
                pause: 0,
                label: retryLabel(attempt.label, retry),
                retry: { ...retry, times: (retry.times ?? 1) - 1, rerun: [] }
            };
            if (retry.new_session) return [...(retry.rerun ?? []), again, ...pending];
            pending.unshift(again);
        }
        return [];
    } finally {
        await closeSession(client);
    }
}

let fatal = null;
try {
    let pending = [...SCRIPT];
    while (pending.length) pending = await inOneSession(pending);
} catch (error) {
    fatal = `${error?.constructor?.name ?? 'Error'}: ${error?.message ?? error}`;
    log(`fatal: ${error?.stack ?? error}`);
}
process.stdout.write(
    `${JSON.stringify({ pid: process.pid, sdk_version: SDK_VERSION, attempts, wire, fatal })}\n`,
    () => process.exit(0)
);

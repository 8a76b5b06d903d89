#!/usr/bin/env node
// Runs a list of MCP steps with the official TypeScript SDK client and prints ONE JSON object on stdout.
//
//   node tests/clients/ts/client.mjs --url URL --steps JSON
//        [--transport streamable-http|sse] [--auth-token T] [--timeout-ms N]
//
// Steps in:  [{"op": "list_tools"}, {"op": "call", "tool": "echo", "args": {"text": "hi"}}]
// Out:       {"client": "typescript-sdk", "sdk_version": "1.32.2", "steps": [...], "fatal": null | {"type", "message"}}
// Each step: {"op", "tool", "ok", "result", "error": {"type", "code", "message"} | null,
//             "progress": [{"progress", "total", "message", "t"}], "t_start", "t_end"}   (times: epoch seconds)
// error.code: the JSON-RPC code for McpError (-32001 = the SDK's local request timeout), the HTTP status
// for StreamableHTTPError / SseError (-1 for an unexpected content type), else null.
// The URL's host:port is replaced by <HOST> in every error/fatal/progress message, so runs through
// different ports compare equal. Exit status 0 whenever the JSON was printed; 2 for usage errors.
// stderr gets one line per HTTP request the transport makes (method, URL, Last-Event-ID, status) and
// every error the transport reports; it is for humans only.
//
// How the SDK resumes (read in node_modules/@modelcontextprotocol/sdk/dist/esm/client/streamableHttp.js,
// SDK 1.32.2; this runner keeps the defaults, it passes no reconnectionOptions):
// - DEFAULT_STREAMABLE_HTTP_RECONNECTION_OPTIONS = {initialReconnectionDelay: 1000,
//   maxReconnectionDelay: 30000, reconnectionDelayGrowFactor: 1.5, maxRetries: 2}.
// - _handleSseStream(): a POST's SSE stream is resumable only once an event with an `id:` was seen
//   (hasPrimingEvent) and only while no *result* response has arrived (receivedResponse is set by
//   isJSONRPCResultResponse, so a JSON-RPC *error* response does not count: a primed stream that ends
//   after an error response still schedules a resume GET). Both a broken stream (reader throws) and a
//   clean end of stream trigger it; the GET stream opened after `notifications/initialized` is always
//   resumable.
// - _scheduleReconnection(): waits _getNextReconnectionDelay(attempt) = the server's last `retry:` value
//   if any was ever seen on any stream of this transport (sticky, no backoff), else
//   min(1000 * 1.5^attempt, 30000) ms; then _startOrAuthSse() sends GET with `Last-Event-ID: <last id>`
//   (Accept: text/event-stream, same session/protocol/auth headers). Only a failed GET (fetch error or a
//   non-2xx other than 405) counts as a try: 1 s, then 1.5 s, then it gives up after 2 tries with
//   onerror "Maximum reconnection attempts (2) exceeded." -- the request then waits for its timeout.
//   A 405 to the GET is taken as "no SSE here" and ends resumption silently. A GET that succeeds is
//   itself resumable and starts over at attempt 0 if it breaks too. The POST is never re-sent.
// - The response that arrives on the resumed GET is delivered to the pending request by its JSON-RPC id.
// - A response the transport cannot parse (bad JSON) or validate (e.g. both result and error) is dropped
//   with onerror and nothing names the request it was for, so that request ends only at its timeout
//   (-32001 after --timeout-ms). Tests that expect no answer pass a short --timeout-ms (about 2 s: past
//   the resume GET 1 s after the stream ends); the 20000 default is for runs that expect answers.
//
// Progress caveat (shared/protocol.js, Protocol._onnotification vs _onresponse): notifications reach
// their handler a microtask later, responses settle synchronously and remove the progress handler. The
// legacy SSE transport (eventsource package) dispatches all events of one network chunk synchronously,
// so a final progress event that shares a chunk with the response is dropped (stderr then shows
// "Received a progress notification for an unknown token"). Streamable HTTP awaits each event and
// does not lose it. This runner reports what onprogress saw; it does not paper over the SDK.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const USAGE =
    'usage: node client.mjs --url URL --steps JSON [--transport streamable-http|sse] ' +
    '[--auth-token T] [--timeout-ms N]';

function usageError(message) {
    process.stderr.write(`client.mjs: ${message}\n${USAGE}\n`);
    process.exit(2);
}

function sdkVersion() {
    try {
        const require = createRequire(import.meta.url);
        let dir = dirname(require.resolve('@modelcontextprotocol/sdk/client/index.js'));
        for (let i = 0; i < 8; i++) {
            try {
                const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
                if (pkg.name === '@modelcontextprotocol/sdk') {
                    return pkg.version;
                }
            } catch {
                // no package.json here, go up
            }
            dir = dirname(dir);
        }
    } catch {
        // fall through
    }
    return null;
}

function parseCli() {
    let values;
    try {
        ({ values } = parseArgs({
            options: {
                url: { type: 'string' },
                steps: { type: 'string' },
                transport: { type: 'string', default: 'streamable-http' },
                'auth-token': { type: 'string' },
                'timeout-ms': { type: 'string', default: '20000' },
                help: { type: 'boolean', short: 'h' }
            },
            strict: true,
            allowPositionals: false
        }));
    } catch (err) {
        usageError(err.message);
    }
    if (values.help) {
        process.stdout.write(`${USAGE}\n`);
        process.exit(0);
    }
    if (!values.url) usageError('--url is required');
    if (values.steps === undefined) usageError('--steps is required');
    let url;
    try {
        url = new URL(values.url);
    } catch {
        usageError(`--url is not a URL: ${values.url}`);
    }
    if (!['streamable-http', 'sse'].includes(values.transport)) {
        usageError(`--transport must be streamable-http or sse, not ${values.transport}`);
    }
    const timeoutMs = Number(values['timeout-ms']);
    if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) {
        usageError(`--timeout-ms must be a positive integer, not ${values['timeout-ms']}`);
    }
    let steps;
    try {
        steps = JSON.parse(values.steps);
    } catch (err) {
        usageError(`--steps is not JSON: ${err.message}`);
    }
    if (!Array.isArray(steps)) usageError('--steps must be a JSON array');
    steps.forEach((step, i) => {
        if (step === null || typeof step !== 'object' || Array.isArray(step)) {
            usageError(`step ${i} is not an object`);
        }
        if (step.op === 'call') {
            if (typeof step.tool !== 'string') usageError(`step ${i}: "call" needs a string "tool"`);
            if (step.args !== undefined && (step.args === null || typeof step.args !== 'object' || Array.isArray(step.args))) {
                usageError(`step ${i}: "args" must be an object`);
            }
        } else if (step.op !== 'list_tools') {
            usageError(`step ${i}: unknown op ${JSON.stringify(step.op)} (expected "list_tools" or "call")`);
        }
    });
    return { url, steps, transport: values.transport, authToken: values['auth-token'], timeoutMs };
}

const opts = parseCli();
const now = () => Date.now() / 1000;

// Redact the URL's host:port (also the resolved form, e.g. 127.0.0.1:PORT for localhost:PORT).
const port = opts.url.port || (opts.url.protocol === 'https:' ? '443' : '80');
const portPattern = new RegExp(`(\\[[0-9A-Fa-f:.]+\\]|[A-Za-z0-9._-]+):${port}(?![0-9])`, 'g');
function redact(text) {
    if (typeof text !== 'string') return text;
    return text.split(opts.url.host).join('<HOST>').replace(portPattern, '<HOST>');
}

function log(line) {
    process.stderr.write(`[ts-client ${now().toFixed(3)}] ${line}\n`);
}

function describe(err) {
    if (err === null || typeof err !== 'object') {
        return { type: typeof err, code: null, message: redact(String(err)) };
    }
    let message = typeof err.message === 'string' ? err.message : String(err);
    // Node's fetch says only "fetch failed"; the reason (ECONNREFUSED, socket closed...) is in `cause`.
    if (err.cause && typeof err.cause === 'object' && err.cause.message && !message.includes(err.cause.message)) {
        message = `${message} (cause: ${err.cause.code ? `${err.cause.code} ` : ''}${err.cause.message})`;
    }
    return {
        type: err.constructor?.name || err.name || 'Error',
        code: typeof err.code === 'number' ? err.code : null,
        message: redact(message)
    };
}

// fetch that logs one stderr line per HTTP request.
async function loggingFetch(input, init) {
    const method = init?.method ?? (input instanceof Request ? input.method : 'GET');
    const url = input instanceof Request ? input.url : String(input);
    const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
    const lastEventId = headers.get('last-event-id');
    const tag = `${method} ${url}${lastEventId !== null ? ` Last-Event-ID=${lastEventId}` : ''}`;
    try {
        const response = await fetch(input, init);
        log(`${tag} -> ${response.status} ${response.headers.get('content-type') ?? ''}`.trimEnd());
        return response;
    } catch (err) {
        log(`${tag} -> failed: ${describe(err).message}`);
        throw err;
    }
}

const output = { client: 'typescript-sdk', sdk_version: sdkVersion(), steps: [], fatal: null };
let finished = false;

function finish() {
    if (finished) return;
    finished = true;
    process.stdout.write(`${JSON.stringify(output)}\n`, () => process.exit(0));
}

process.on('unhandledRejection', err => log(`unhandled rejection: ${describe(err).message}`));
process.on('uncaughtException', err => {
    log(`uncaught exception: ${err?.stack ?? err}`);
    if (output.fatal === null) output.fatal = { type: describe(err).type, message: describe(err).message };
    finish();
});

async function main() {
    const requestInit = opts.authToken ? { headers: { Authorization: `Bearer ${opts.authToken}` } } : undefined;
    const transport =
        opts.transport === 'sse'
            ? new SSEClientTransport(opts.url, { requestInit, fetch: loggingFetch })
            : new StreamableHTTPClientTransport(opts.url, { requestInit, fetch: loggingFetch });

    const client = new Client(
        { name: 'mcp-blackbox-ts-client', version: '0.1.0' },
        { capabilities: { elicitation: {} } }
    );
    client.setRequestHandler(ElicitRequestSchema, async request => {
        log(`elicitation/create: ${redact(request.params?.message ?? '')} -> accept {"name": "Ada"}`);
        return { action: 'accept', content: { name: 'Ada' } };
    });
    client.onerror = err => log(`transport/protocol error: ${describe(err).message}`);

    try {
        await client.connect(transport, { timeout: opts.timeoutMs });
    } catch (err) {
        const { type, message } = describe(err);
        output.fatal = { type, message };
        await client.close().catch(() => {});
        return;
    }

    for (const step of opts.steps) {
        const record = {
            op: step.op,
            tool: step.op === 'call' ? step.tool : null,
            ok: false,
            result: null,
            error: null,
            progress: [],
            t_start: now(),
            t_end: null
        };
        // onprogress makes the SDK put _meta.progressToken (= the request id) on tools/call only.
        const callOptions = {
            timeout: opts.timeoutMs,
            resetTimeoutOnProgress: true,
            onprogress: p => {
                record.progress.push({
                    progress: p.progress,
                    total: p.total ?? null,
                    message: p.message === undefined ? null : redact(p.message),
                    t: now()
                });
            }
        };
        try {
            if (step.op === 'list_tools') {
                record.result = await client.listTools(undefined, { timeout: opts.timeoutMs });
            } else {
                record.result = await client.callTool(
                    { name: step.tool, arguments: step.args ?? {} },
                    undefined,
                    callOptions
                );
            }
            record.ok = true;
        } catch (err) {
            record.error = describe(err);
        }
        record.t_end = now();
        output.steps.push(record);
    }

    await client.close().catch(err => log(`close failed: ${describe(err).message}`));
}

main()
    .catch(err => {
        log(`runner error: ${err?.stack ?? err}`);
        if (output.fatal === null) output.fatal = { type: describe(err).type, message: describe(err).message };
    })
    .finally(finish);

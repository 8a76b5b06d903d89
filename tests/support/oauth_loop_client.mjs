#!/usr/bin/env node
// An OAuth app on the official TypeScript SDK (OAuthClientProvider, StreamableHTTPClientTransport's authProvider)
// that keeps trying while the resource server refuses every token (tests/support/oauth_loop_server.py).
//
//   node tests/support/oauth_loop_client.mjs --url URL/mcp --control http://127.0.0.1:PORT --attempts N
//
//   1. connect: 401, discovery, registration, authorize (the code read from the Location header), token; a new
//      transport connects; echo succeeds.
//   2. /_control/reject: the resource server refuses every access token from now on.
//   3. echo: 401; the SDK refreshes (token request), re-sends, gets 401 again and throws.
//   4. N times, as apps do after an auth error: a new transport and client, connect: initialize gets 401, the SDK
//      refreshes and re-sends, 401 again, it throws; the app waits APP_RETRY_DELAY_MS.
// stdout: ONE JSON object {"sdk_version", "attempts": [{"what", "outcome", "error"}], "refreshes", "fatal"}.

import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const SDK_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'clients', 'ts', 'node_modules', '@modelcontextprotocol', 'sdk');
const sdk = async (path) => import(pathToFileURL(join(SDK_DIR, 'dist', 'esm', path)).href);
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const { UnauthorizedError } = await sdk('client/auth.js');
const SDK_VERSION = JSON.parse(readFileSync(join(SDK_DIR, 'package.json'), 'utf8')).version;

const REDIRECT_URL = 'http://127.0.0.1:9/oauth/callback'; // never fetched: the code is read from Location
const APP_RETRY_DELAY_MS = 200;

const { values: args } = parseArgs({
    options: { url: { type: 'string' }, control: { type: 'string' }, attempts: { type: 'string', default: '3' } }
});

let refreshes = 0; // refresh_token grants the SDK sent (counted from its fetch)

async function countingFetch(input, init = {}) {
    const body = typeof init.body === 'string' || init.body instanceof URLSearchParams ? String(init.body) : '';
    if (body.includes('grant_type=refresh_token')) refreshes += 1;
    return fetch(input, init);
}

/** The app's credential store and its "browser": the authorize page approves at once, the code is kept. */
class AutomatedProvider {
    constructor() {
        this.stored = {};
        this.pendingCode = undefined;
    }
    get redirectUrl() {
        return REDIRECT_URL;
    }
    get clientMetadata() {
        return {
            client_name: 'mcp-blackbox auth-loop app',
            redirect_uris: [REDIRECT_URL],
            grant_types: ['authorization_code', 'refresh_token'],
            response_types: ['code'],
            token_endpoint_auth_method: 'client_secret_post'
        };
    }
    clientInformation() {
        return this.stored.client;
    }
    saveClientInformation(info) {
        this.stored.client = info;
    }
    tokens() {
        return this.stored.tokens;
    }
    saveTokens(tokens) {
        this.stored.tokens = tokens;
    }
    saveCodeVerifier(verifier) {
        this.stored.verifier = verifier;
    }
    codeVerifier() {
        return this.stored.verifier;
    }
    invalidateCredentials(scope) {
        if (scope === 'all' || scope === 'client') this.stored.client = undefined;
        if (scope === 'all' || scope === 'tokens') this.stored.tokens = undefined;
        if (scope === 'all' || scope === 'verifier') this.stored.verifier = undefined;
    }
    async redirectToAuthorization(authorizationUrl) {
        const response = await countingFetch(authorizationUrl, { method: 'GET', redirect: 'manual' });
        const location = response.headers.get('location');
        await response.body?.cancel();
        const code = location ? new URL(location).searchParams.get('code') : null;
        if (!code) throw new Error(`authorize answered ${response.status} without a code`);
        this.pendingCode = code;
    }
}

const transportFor = (provider) =>
    new StreamableHTTPClientTransport(new URL(args.url), { authProvider: provider, fetch: countingFetch });

async function connect(provider) {
    const first = transportFor(provider);
    try {
        await new Client({ name: 'auth-loop-app', version: '1.0.0' }).connect(first);
        throw new Error('connected without authorization');
    } catch (error) {
        if (!(error instanceof UnauthorizedError)) throw error;
    }
    await first.finishAuth(provider.pendingCode);
    await first.close();
    const transport = transportFor(provider);
    const client = new Client({ name: 'auth-loop-app', version: '1.0.0' });
    await client.connect(transport);
    return { client, transport };
}

const attempts = [];

async function attempt(what, action) {
    const record = { what, outcome: 'ok', error: null };
    try {
        await action();
    } catch (error) {
        record.outcome = 'error';
        record.error = `${error?.constructor?.name}: ${error?.message}`;
    }
    attempts.push(record);
}

const output = { sdk_version: SDK_VERSION, attempts, refreshes: 0, fatal: null };
try {
    const provider = new AutomatedProvider();
    const { client } = await connect(provider);
    await attempt('echo before', () => client.callTool({ name: 'echo', arguments: { text: 'before' } }));
    const rejected = await fetch(new URL('/_control/reject', args.control), { method: 'POST' });
    if (!rejected.ok) throw new Error(`control reject: ${rejected.status}`);
    await attempt('echo rejected', () => client.callTool({ name: 'echo', arguments: { text: 'rejected' } }));
    await client.close();
    for (let n = 1; n <= Number(args.attempts); n++) {
        await new Promise((resolve) => setTimeout(resolve, APP_RETRY_DELAY_MS));
        const again = new Client({ name: 'auth-loop-app', version: '1.0.0' });
        await attempt(`reconnect ${n}`, () => again.connect(transportFor(provider)));
        await again.close().catch(() => undefined);
    }
} catch (error) {
    output.fatal = `${error?.constructor?.name}: ${error?.stack ?? error}`;
}
output.refreshes = refreshes;
process.stdout.write(JSON.stringify(output) + '\n');

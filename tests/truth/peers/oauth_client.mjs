#!/usr/bin/env node
// The OAuth scenario of the truth corpus (tests/truth/family_oauth.py), driven by the official TypeScript SDK
// client and its own OAuth support (OAuthClientProvider, StreamableHTTPClientTransport's authProvider).
//
//   node tests/truth/peers/oauth_client.mjs --url URL/mcp --control http://127.0.0.1:PORT --family NAME --runs N
//
// Each run is a fresh app with no stored credentials:
//   1. connect: initialize gets 401; the SDK discovers, registers, sends the user to /authorize (this provider
//      fetches the URL and reads the code from the Location header: no browser) and throws; the app
//      finishes the code exchange and connects again on a new transport.
//   2. echo                       (first)
//   3. the server revokes the access token; echo gets 401, the SDK refreshes and re-sends the same message
//      (the copy is relabelled by the family from the capture: retry, auth-retry)
//   4. the server revokes every token; echo gets 401, refresh fails, the SDK asks for a new authorization and
//      throws; the app finishes it and calls again under a new id (retry, auth-retry)
//   5. the server refuses balance with a 403 (a policy, no auth challenge); the app calls again with the same
//      credentials under a new id (retry, app-retry)
// stdout: ONE JSON object {"sdk_version", "attempts": [...], "wire": [...], "fatal"}: what the app saw per
// tools/call, and every HTTP request the SDK made (through its fetch option), in order.
// Control requests go to --control directly, with the global fetch: they are not the client's traffic.

import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const SDK_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'clients', 'ts', 'node_modules', '@modelcontextprotocol', 'sdk');
const sdk = async (path) => import(pathToFileURL(join(SDK_DIR, 'dist', 'esm', path)).href);
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const { UnauthorizedError } = await sdk('client/auth.js');
const SDK_VERSION = JSON.parse(readFileSync(join(SDK_DIR, 'package.json'), 'utf8')).version;

const REDIRECT_URL = 'http://127.0.0.1:9/oauth/callback'; // never fetched: the code is read from Location
const APP_RETRY_DELAY_MS = 200;

const { values: args } = parseArgs({
    options: {
        url: { type: 'string' },
        control: { type: 'string' },
        family: { type: 'string', default: 'oauth' },
        runs: { type: 'string', default: '1' }
    }
});

const wire = [];
const attempts = [];

/** A short fingerprint of a credential: the log shows whether it changed without holding it. */
const fingerprint = (value) => (value ? createHash('sha256').update(value).digest('hex').slice(0, 12) : null);

/** The SDK's fetch, logged: what went on the wire, in order (the family matches it to the capture). */
async function loggedFetch(input, init = {}) {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
    const entry = {
        seq: wire.length,
        method: init.method ?? 'GET',
        path: url.pathname,
        query: url.search ? [...url.searchParams.keys()] : [],
        authorization: fingerprint(headers.get('authorization')),
        mcp_protocol_version: headers.get('mcp-protocol-version'),
        session: headers.get('mcp-session-id'),
        rpc: null,
        status: null
    };
    if (typeof init.body === 'string' && headers.get('content-type')?.includes('application/json')) {
        const message = JSON.parse(init.body);
        entry.rpc = { id: message.id ?? null, method: message.method ?? null, label: message.params?._meta?.truth ?? null };
    } else if (init.body instanceof URLSearchParams || typeof init.body === 'string') {
        entry.form = [...new URLSearchParams(String(init.body)).keys()];
    }
    wire.push(entry);
    try {
        const response = await fetch(input, init);
        entry.status = response.status;
        entry.www_authenticate = response.headers.get('www-authenticate');
        return response;
    } catch (error) {
        entry.error = String(error);
        throw error;
    }
}

/** An app's credential store and its "browser": the authorize page approves at once, the code is kept. */
class AutomatedProvider {
    constructor() {
        this._client = undefined;
        this._tokens = undefined;
        this._verifier = undefined;
        this.pendingCode = undefined;
    }
    get redirectUrl() {
        return REDIRECT_URL;
    }
    get clientMetadata() {
        return {
            client_name: 'mcp-blackbox truth oauth client',
            redirect_uris: [REDIRECT_URL],
            grant_types: ['authorization_code', 'refresh_token'],
            response_types: ['code'],
            token_endpoint_auth_method: 'client_secret_post'
        };
    }
    clientInformation() {
        return this._client;
    }
    saveClientInformation(info) {
        this._client = info;
    }
    tokens() {
        return this._tokens;
    }
    saveTokens(tokens) {
        this._tokens = tokens;
    }
    saveCodeVerifier(verifier) {
        this._verifier = verifier;
    }
    codeVerifier() {
        return this._verifier;
    }
    invalidateCredentials(scope) {
        if (scope === 'all' || scope === 'client') this._client = undefined;
        if (scope === 'all' || scope === 'tokens') this._tokens = undefined;
        if (scope === 'all' || scope === 'verifier') this._verifier = undefined;
    }
    async redirectToAuthorization(authorizationUrl) {
        const response = await loggedFetch(authorizationUrl, { method: 'GET', redirect: 'manual' });
        const location = response.headers.get('location');
        await response.body?.cancel();
        if (!location) throw new Error(`authorize answered ${response.status} without Location`);
        const code = new URL(location).searchParams.get('code');
        if (!code) throw new Error(`authorize redirected without a code: ${location}`);
        this.pendingCode = code;
    }
    takeCode() {
        const code = this.pendingCode;
        this.pendingCode = undefined;
        if (!code) throw new Error('the SDK asked for no authorization');
        return code;
    }
}

const control = async (path) => {
    const response = await fetch(new URL(path, args.control), { method: 'POST' });
    if (!response.ok) throw new Error(`control ${path}: ${response.status}`);
    return response.json();
};

const label = (request, attempt, kind, origin = null) => ({ request, attempt, kind, origin, reexecutes: false });

/** One tools/call as the app sees it; never throws, the outcome says it. */
async function call(client, tool, toolArgs, truth) {
    const seq = wire.length;
    const record = { label: truth, tool, arguments: toolArgs, outcome: 'ok', error: null, t_start: Date.now() / 1000 };
    try {
        const result = await client.callTool({ name: tool, arguments: toolArgs, _meta: { truth } });
        record.outcome = result.isError ? 'tool-error' : 'ok';
    } catch (error) {
        record.outcome = 'error';
        record.error = `${error.constructor.name}: ${error.message}`;
        record.unauthorized = error instanceof UnauthorizedError;
        record.http_status = error.code ?? null;
    }
    record.t_end = Date.now() / 1000;
    record.wire = wire.slice(seq).map((entry) => entry.seq); // the requests the SDK made for this call
    attempts.push(record);
    return record;
}

/** connect() as an OAuth app does it: the first try throws after the redirect; finish, then a new transport. */
async function connect(provider) {
    const url = new URL(args.url);
    const first = new StreamableHTTPClientTransport(url, { authProvider: provider, fetch: loggedFetch });
    const client = new Client({ name: 'truth-oauth-app', version: '1.0.0' });
    try {
        await client.connect(first);
        return { client, transport: first }; // already authorized (never, with fresh credentials)
    } catch (error) {
        if (!(error instanceof UnauthorizedError)) throw error;
    }
    await first.finishAuth(provider.takeCode());
    await first.close();
    const transport = new StreamableHTTPClientTransport(url, { authProvider: provider, fetch: loggedFetch });
    const authorized = new Client({ name: 'truth-oauth-app', version: '1.0.0' });
    await authorized.connect(transport);
    return { client: authorized, transport };
}

async function run(index) {
    const prefix = `${args.family}/r${index}`;
    const provider = new AutomatedProvider();
    const { client, transport } = await connect(provider);
    try {
        await call(client, 'echo', { text: `run ${index}: hello` }, label(`${prefix}/hello`, 1, 'first'));

        // The access token is revoked: the SDK refreshes inside send() and re-sends the same message.
        await control('/_control/revoke');
        await call(client, 'echo', { text: `run ${index}: after refresh` }, label(`${prefix}/refreshed`, 1, 'first'));

        // Every token is revoked: refresh fails, the SDK asks for a new authorization and throws.
        await control('/_control/revoke?refresh=1');
        const lost = await call(client, 'echo', { text: `run ${index}: after re-authorization` }, label(`${prefix}/reauth`, 1, 'first'));
        if (lost.unauthorized) {
            await transport.finishAuth(provider.takeCode());
            await call(client, 'echo', { text: `run ${index}: after re-authorization` }, label(`${prefix}/reauth`, 2, 'retry', 'auth-retry'));
        }

        // A policy refuses the call with 403 (no auth challenge); the app tries again with the same token.
        await control('/_control/refuse?tool=balance');
        const refused = await call(client, 'balance', { account: `acct-${index}` }, label(`${prefix}/balance`, 1, 'first'));
        if (refused.outcome === 'error') {
            await new Promise((resolve) => setTimeout(resolve, APP_RETRY_DELAY_MS));
            await call(client, 'balance', { account: `acct-${index}` }, label(`${prefix}/balance`, 2, 'retry', 'app-retry'));
        }
    } finally {
        await transport.terminateSession().catch(() => undefined);
        await client.close();
    }
}

const output = { sdk_version: SDK_VERSION, attempts, wire, fatal: null };
try {
    for (let index = 1; index <= Number(args.runs); index++) {
        await run(index);
    }
} catch (error) {
    output.fatal = `${error?.constructor?.name}: ${error?.stack ?? error}`;
}
process.stdout.write(JSON.stringify(output) + '\n');

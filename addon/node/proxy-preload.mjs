// mcp-blackbox run: make Node's fetch honour HTTP_PROXY / HTTPS_PROXY / NO_PROXY.
//
// Loaded before the program with NODE_OPTIONS=--import=<this file>. Node 24 and 22.21+ do it themselves
// with NODE_USE_ENV_PROXY=1 (which `run` sets too): then this file does nothing. Older Node (20) ignores
// the proxy variables in fetch; this sets fetch's global dispatcher (the Symbol that Node's bundled undici
// and the undici package share):
//   1. undici's EnvHttpProxyAgent, when the program can resolve the undici package (from its own folder or
//      the working directory);
//   2. else a small dispatcher below, on node:http and node:tls: CONNECT tunnels for https, absolute URLs
//      for http, direct connections for NO_PROXY hosts. One connection per request (no keep-alive).
// The CA comes from NODE_EXTRA_CA_CERTS, which Node reads itself. Only fetch (and what uses it) is
// covered: node:http/https requests follow the proxy variables only where NODE_USE_ENV_PROXY works.
// Nothing here throws at start-up: a failure leaves fetch as it was and says so on stderr.

import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import http from 'node:http';
import tls from 'node:tls';

const DISPATCHER = Symbol.for('undici.globalDispatcher.1');

function nativeEnvProxy() {
    const [major, minor] = process.versions.node.split('.').map(Number);
    return major >= 24 || (major === 22 && minor >= 21);
}

function env(name) {
    return process.env[name] ?? process.env[name.toLowerCase()] ?? '';
}

function undiciFromProgram() {
    const places = [process.cwd() + '/'];
    if (process.argv[1]) {
        places.unshift(resolve(dirname(process.argv[1])) + '/');
    }
    for (const place of places) {
        try {
            return createRequire(place).resolve('undici');
        } catch {
            // not resolvable from there
        }
    }
    return null;
}

function noProxy(url) {
    const list = (process.env.NO_PROXY ?? process.env.no_proxy ?? '').split(/[\s,]+/).filter(Boolean);
    const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
    const port = url.port || (url.protocol === 'https:' ? '443' : '80');
    return list.some((entry) => {
        if (entry === '*') {
            return true;
        }
        let [name, entryPort] = entry.toLowerCase().replace(/^\[|\]$/g, '').split(/:(?=\d+$)/);
        if (entryPort && entryPort !== port) {
            return false;
        }
        name = name.replace(/^\*?\./, '');
        return host === name || host.endsWith('.' + name);
    });
}

function headerList(headers) {
    // undici hands headers as an object, an array of pairs or a flat array, depending on its version.
    const out = [];
    if (Array.isArray(headers)) {
        if (headers.length && Array.isArray(headers[0])) {
            for (const [k, v] of headers) out.push([String(k), String(v)]);
        } else {
            for (let i = 0; i + 1 < headers.length; i += 2) out.push([String(headers[i]), String(headers[i + 1])]);
        }
    } else if (headers) {
        for (const [k, v] of Object.entries(headers)) {
            for (const one of Array.isArray(v) ? v : [v]) out.push([k, String(one)]);
        }
    }
    return out;
}

class EnvProxyDispatcher {
    dispatch(opts, handler) {
        const url = new URL(opts.path, opts.origin);
        const proxyText = url.protocol === 'https:' ? env('HTTPS_PROXY') || env('HTTP_PROXY') : env('HTTP_PROXY');
        const proxy = proxyText && !noProxy(url) ? new URL(proxyText) : null;
        const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
        let request = null;
        let aborted = null;
        let settled = false;
        const fail = (error) => {
            if (!settled) {
                settled = true;
                handler.onError?.(aborted ?? error);
            }
        };
        const abort = (reason) => {
            aborted = reason ?? new Error('aborted');
            request?.destroy(aborted);
        };
        handler.onConnect?.(abort, null);
        if (aborted) {
            return true;
        }
        const headers = headerList(opts.headers);
        if (!headers.some(([k]) => k.toLowerCase() === 'host')) {
            headers.unshift(['host', url.host]);
        }
        const options = { method: opts.method, headers: headers.flat(), setHost: false };
        const tunnel = () =>
            new Promise((done, fail) => {
                const connect = http.request({
                    host: proxy.hostname.replace(/^\[|\]$/g, ''),
                    port: Number(proxy.port || 80),
                    method: 'CONNECT',
                    path: `${url.hostname}:${port}`,
                    headers: { host: `${url.hostname}:${port}` },
                });
                connect.once('connect', (response, socket) => {
                    if (response.statusCode !== 200) {
                        socket.destroy();
                        fail(new Error(`proxy CONNECT answered ${response.statusCode}`));
                        return;
                    }
                    done(socket);
                });
                connect.once('error', fail);
                connect.end();
            });
        const start = async () => {
            if (url.protocol === 'https:') {
                const socket = proxy ? await tunnel() : undefined;
                const servername = tls.isIP?.(url.hostname) ? undefined : url.hostname;
                const secure = tls.connect({
                    socket,
                    host: url.hostname.replace(/^\[|\]$/g, ''),
                    port,
                    servername,
                    ALPNProtocols: ['http/1.1'],
                });
                Object.assign(options, { path: url.pathname + url.search, createConnection: () => secure });
            } else if (proxy) {
                Object.assign(options, {
                    host: proxy.hostname.replace(/^\[|\]$/g, ''),
                    port: Number(proxy.port || 80),
                    path: url.href,
                });
            } else {
                Object.assign(options, { host: url.hostname.replace(/^\[|\]$/g, ''), port, path: url.pathname + url.search });
            }
            if (aborted) {
                throw aborted;
            }
            request = http.request(options);
            request.once('response', (response) => {
                const raw = [];
                for (let i = 0; i + 1 < response.rawHeaders.length; i += 2) {
                    raw.push(Buffer.from(response.rawHeaders[i]), Buffer.from(response.rawHeaders[i + 1]));
                }
                const resume = () => response.resume();
                if (handler.onHeaders?.(response.statusCode, raw, resume, response.statusMessage) === false) {
                    response.pause();
                }
                response.on('data', (chunk) => {
                    if (!settled && handler.onData?.(chunk) === false) {
                        response.pause();
                    }
                });
                response.once('end', () => {
                    const trailers = [];
                    for (let i = 0; i + 1 < response.rawTrailers.length; i += 2) {
                        trailers.push(Buffer.from(response.rawTrailers[i]), Buffer.from(response.rawTrailers[i + 1]));
                    }
                    if (!settled) {
                        settled = true;
                        handler.onComplete?.(trailers);
                    }
                });
                response.once('error', fail);
                response.once('close', () => fail(new Error('the connection closed before the response ended')));
            });
            request.once('error', fail);
            const body = opts.body;
            if (body == null) {
                request.end();
            } else if (typeof body === 'string' || body instanceof Uint8Array) {
                request.end(body);
            } else if (typeof body[Symbol.asyncIterator] === 'function' || typeof body[Symbol.iterator] === 'function') {
                for await (const chunk of body) {
                    if (!request.write(chunk)) {
                        await new Promise((done) => request.once('drain', done));
                    }
                }
                request.end();
            } else {
                request.end(body);
            }
        };
        start().catch(fail);
        return true;
    }

    close() {
        return Promise.resolve();
    }

    destroy() {
        return Promise.resolve();
    }
}

// undici 6 warns once, when the first EnvHttpProxyAgent is made: "EnvHttpProxyAgent is experimental, expect
// them to change at any time." (code UNDICI-EHPA). That agent is the preload's, not the program's: its warning
// must not land on the command's stderr. Only that warning is dropped, and only while the agent is made;
// every other warning goes through as it came.
const OUR_WARNING = 'EnvHttpProxyAgent is experimental';

function withoutOurWarning(make) {
    const emitWarning = process.emitWarning;
    process.emitWarning = function (warning, ...rest) {
        const text = typeof warning === 'string' ? warning : warning?.message;
        if (typeof text === 'string' && text.startsWith(OUR_WARNING)) {
            return undefined;
        }
        return emitWarning.call(this, warning, ...rest);
    };
    try {
        return make();
    } finally {
        process.emitWarning = emitWarning;
    }
}

async function install() {
    if (nativeEnvProxy() && process.env.NODE_USE_ENV_PROXY === '1') {
        return 'node';
    }
    if (!env('HTTPS_PROXY') && !env('HTTP_PROXY')) {
        return 'none';
    }
    const found = undiciFromProgram();
    if (found) {
        try {
            const undici = await import(pathToFileURL(found).href);
            if (typeof undici.EnvHttpProxyAgent === 'function') {
                undici.setGlobalDispatcher(withoutOurWarning(() => new undici.EnvHttpProxyAgent()));
                return 'undici';
            }
        } catch {
            // fall back to the built-in dispatcher
        }
    }
    globalThis[DISPATCHER] = new EnvProxyDispatcher();
    return 'builtin';
}

try {
    const how = await install();
    if (process.env.MCP_BLACKBOX_PRELOAD_REPORT) {
        process.stderr.write(`mcp-blackbox proxy preload: ${how}\n`);
    }
} catch (error) {
    process.stderr.write(`mcp-blackbox: the proxy preload failed (${error}); fetch ignores the proxy\n`);
}

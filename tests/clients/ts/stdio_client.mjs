#!/usr/bin/env node
// Runs MCP steps with the official TypeScript SDK client over stdio (StdioClientTransport) and prints ONE
// JSON object on stdout. Used by tests/e2e/test_stdio_record.py.
//
//   node tests/clients/ts/stdio_client.mjs --command CMD --args JSON --steps JSON [--timeout-ms N]
//
// Steps as client.mjs takes them: [{"op": "list_tools"}, {"op": "call", "tool": "echo", "args": {...}}], and
// {"op": "pause", "seconds": S}: a pause between two calls.
// Out: {"client": "typescript-sdk", "steps": [{"op", "tool", "ok", "result", "error"}], "fatal", "closed",
//       "stderr"}: no times, so that a run through the recorder and a run without it compare equal.
// "stderr" is everything the server process wrote on stderr (the transport's stderr: 'pipe'), "closed"
// whether the transport saw the process go before the runner closed it.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
    options: {
        command: { type: 'string' },
        args: { type: 'string', default: '[]' },
        steps: { type: 'string', default: '[]' },
        'timeout-ms': { type: 'string', default: '20000' }
    },
    strict: true
});
if (!values.command) {
    process.stderr.write('usage: node stdio_client.mjs --command CMD --args JSON --steps JSON [--timeout-ms N]\n');
    process.exit(2);
}
const timeout = Number(values['timeout-ms']);
const output = { client: 'typescript-sdk', steps: [], fatal: null, closed: false, stderr: '' };

const describe = err => ({
    type: err?.constructor?.name ?? typeof err,
    code: typeof err?.code === 'number' ? err.code : null,
    message: String(err?.message ?? err)
});

const transport = new StdioClientTransport({
    command: values.command,
    args: JSON.parse(values.args),
    env: process.env,
    stderr: 'pipe'
});
const stderrChunks = [];
transport.stderr.on('data', chunk => stderrChunks.push(chunk));
const client = new Client({ name: 'mcp-blackbox-ts-stdio-client', version: '0.1.0' }, { capabilities: {} });
let runnerClosing = false;
client.onclose = () => {
    if (!runnerClosing) output.closed = true;
};

try {
    await client.connect(transport, { timeout });
    for (const step of JSON.parse(values.steps)) {
        if (step.op === 'pause') {  // an application's time between two calls; not a step of the output
            await new Promise(done => setTimeout(done, step.seconds * 1000));
            continue;
        }
        const record = { op: step.op, tool: step.tool ?? null, ok: false, result: null, error: null };
        try {
            record.result =
                step.op === 'list_tools'
                    ? await client.listTools(undefined, { timeout })
                    : await client.callTool({ name: step.tool, arguments: step.args ?? {} }, undefined, { timeout });
            record.ok = true;
        } catch (err) {
            record.error = describe(err);
        }
        output.steps.push(record);
    }
} catch (err) {
    output.fatal = describe(err);
}
runnerClosing = !output.closed;
await client.close().catch(() => {});
output.stderr = Buffer.concat(stderrChunks).toString('utf8');
process.stdout.write(`${JSON.stringify(output)}\n`, () => process.exit(0));

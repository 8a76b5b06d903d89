#!/usr/bin/env node
// A stdio MCP server on the official TypeScript SDK (low-level Server, StdioServerTransport), with the
// faults stdio servers have in the field. Used by tests/e2e/test_stdio_record.py.
//
//   node tests/clients/ts/stdio_server.mjs
//
// Tools:
//   echo {text}       the text back
//   big {size}        a text result of `size` characters (a line of several MB on stdout)
//   log_to_stdout {}  console.log()s a line (stdout: the protocol's channel, the classic mistake), then answers
//   chatty {text}     console.error()s an info line (no exception: a look-alike of swallow), returns the text
//   swallow {}        catches its own error, console.error()s the stack, returns an empty success
//   crash {how}       dies mid-call: "exit" (process.exit(3)) or "signal" (SIGKILL to itself)

import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { readFileSync } from 'node:fs';

const PATTERN = '0123456789abcdé€';

const TOOLS = [
    { name: 'echo', props: { text: { type: 'string' } }, required: ['text'] },
    { name: 'big', props: { size: { type: 'integer' } }, required: ['size'] },
    { name: 'log_to_stdout', props: {}, required: [] },
    { name: 'swallow', props: {}, required: [] },
    { name: 'chatty', props: { text: { type: 'string' } }, required: ['text'] },
    { name: 'crash', props: { how: { type: 'string' } }, required: [] }
].map(({ name, props, required }) => ({
    name,
    description: `stdio test tool ${name}`,
    inputSchema: { type: 'object', properties: props, required }
}));

const text = value => ({ content: [{ type: 'text', text: value }] });

const server = new Server({ name: 'stdio-testbed-ts', version: '1.0.0' }, { capabilities: { tools: {} } });

server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));

server.setRequestHandler(CallToolRequestSchema, async request => {
    const args = request.params.arguments ?? {};
    switch (request.params.name) {
        case 'echo':
            return text(String(args.text));
        case 'big':
            return text(PATTERN.repeat(Math.ceil(args.size / PATTERN.length)).slice(0, args.size));
        case 'log_to_stdout':
            console.log('handling log_to_stdout');
            return text('done');
        case 'chatty':
            console.error(`info chatty: echoing ${String(args.text).length} characters, no errors`);
            return text(String(args.text));
        case 'swallow':
            try {
                return text(readFileSync('/nonexistent/settings.json', 'utf8'));
            } catch (err) {
                console.error(err.stack);
                return { content: [] };
            }
        case 'crash':
            console.error(`crash: dying by ${args.how ?? 'exit'}`);
            if (args.how === 'signal') process.kill(process.pid, 'SIGKILL');
            process.exit(3);
            break;
        default:
            throw new Error(`unknown tool ${request.params.name}`);
    }
});

await server.connect(new StdioServerTransport());

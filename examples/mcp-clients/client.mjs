// The official MCP TypeScript SDK (@modelcontextprotocol/sdk, pinned in
// package-lock.json) against a live `warden serve`: scripts/mcp-clients-run.sh
// runs it.
//
//   node client.mjs URL API_KEY EXPECTED_REVISION
//
// Connects with the bearer key (the SDK's `initialize` handshake; Warden
// mints no session), lists the tools, calls `order_status` against the
// example host endpoint and expects the pruned `structuredContent`, then
// calls it with bad arguments and expects `isError`. One line per check;
// exits non-zero on the first failure.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { isDeepStrictEqual } from 'node:util';

const [url, key, expected] = process.argv.slice(2);
// What the example host endpoint answers for A-1001, pruned to the output schema.
const PRUNED = { status: 'shipped', carrier: 'Correos', lines: [{ sku: 'TSHIRT-M', qty: 2 }] };

function check(condition, what) {
    if (!condition) {
        console.error(`typescript-sdk: FAILED: ${what}`);
        process.exit(1);
    }
    console.log(`typescript-sdk: ok ${what}`);
}

const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const client = new Client({ name: 'warden-mcp-clients', version: '1.0.0' });
await client.connect(transport);
check(transport.protocolVersion === expected, `negotiated ${transport.protocolVersion}`);
check(transport.sessionId === undefined, 'no session');

const listed = await client.listTools();
const names = listed.tools.map((t) => t.name).sort();
check(isDeepStrictEqual(names, ['order_status']), `lists the read capabilities only: ${names}`);
check(listed.tools[0].annotations?.readOnlyHint === true, 'readOnlyHint');

const result = await client.callTool({ name: 'order_status', arguments: { order: 'A-1001' } });
check(!result.isError, 'the call succeeded');
check(isDeepStrictEqual(result.structuredContent, PRUNED), `pruned structuredContent ${JSON.stringify(result.structuredContent)}`);

const refused = await client.callTool({ name: 'order_status', arguments: { order: 'not an order' } });
check(refused.isError === true, 'bad arguments are a tool error');
const text = refused.content[0].text;
check(text.startsWith('arguments_invalid') && text.includes('/order'), `located: ${JSON.stringify(text)}`);
await client.close();

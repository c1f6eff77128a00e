"""The official MCP Python SDK (`mcp`, pinned in scripts/ensure-mcp-clients.sh)
against a live `warden serve`: scripts/mcp-clients-run.sh runs it.

    client.py URL API_KEY EXPECTED_REVISION

Connects with the bearer key in `mode="auto"` (a `server/discover` probe,
falling back to `initialize` only for a legacy server), lists the tools,
calls `order_status` against the example host endpoint and expects the
pruned `structuredContent`, then calls it with bad arguments and expects
`isError`. Prints one line per check; exits non-zero on the first failure.
"""

import asyncio
import sys

import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

# What the example host endpoint answers for A-1001, pruned to the output
# schema (its internal `warehouse` field never arrives).
PRUNED = {"status": "shipped", "carrier": "Correos", "lines": [{"sku": "TSHIRT-M", "qty": 2}]}


def check(condition, what):
    if not condition:
        print(f"python-sdk: FAILED: {what}", file=sys.stderr)
        sys.exit(1)
    print(f"python-sdk: ok {what}")


async def main(url, key, expected):
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        transport = streamable_http_client(url, http_client=http, terminate_on_close=False)
        async with Client(transport, mode="auto") as client:
            check(client.protocol_version == expected, f"negotiated {client.protocol_version}")
            listed = await client.list_tools()
            names = sorted(tool.name for tool in listed.tools)
            check(names == ["order_status"], f"lists the read capabilities only: {names}")
            tool = listed.tools[0]
            check(tool.annotations is not None and tool.annotations.read_only_hint, "readOnlyHint")
            result = await client.call_tool("order_status", {"order": "A-1001"})
            check(not result.is_error, "the call succeeded")
            check(result.structured_content == PRUNED, f"pruned structuredContent {result.structured_content}")
            refused = await client.call_tool("order_status", {"order": "not an order"})
            check(refused.is_error, "bad arguments are a tool error")
            text = refused.content[0].text
            check(text.startswith("arguments_invalid") and "/order" in text, f"located: {text!r}")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))

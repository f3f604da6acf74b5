"""The official Python SDK client (mcp 2.x) answering a 2026 server's questions through
Corral: elicitation and sampling callbacks, and calls of tools that ask.

    py_client_mrtr.py MODE stdio CORRAL_BIN CONFIG_FILE TOOLS   (corral mcp --standalone)
    py_client_mrtr.py MODE http URL TOKEN TOOLS

MODE: '2026-07-28' (pinned: the SDK answers input_required results itself, through
Corral's pass-through) or 'legacy' (a 2025 session: Corral sends it ordinary requests and
retries upstream). TOOLS is a JSON array of [name, arguments]. Prints one JSON object:
the protocol, each call's first text and isError, and what the callbacks were asked.
"""

import asyncio
import json
import sys

from mcp import StdioServerParameters, types
from mcp.client.client import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

asked = []


async def on_elicit(context, params):
    asked.append(f"elicitation: {params.message}")
    return types.ElicitResult(
        action="accept", content={"username": "py", "email": "py@example.com"}
    )


async def on_sample(context, params):
    text = params.messages[-1].content.text
    asked.append(f"sampling: {text}")
    return types.CreateMessageResult(
        model="test-model",
        role="assistant",
        content=types.TextContent(type="text", text=f"sampled {len(asked)}"),
    )


async def main():
    mode, transport = sys.argv[1], sys.argv[2]
    tools = json.loads(sys.argv[5])
    if transport == "stdio":
        server = StdioServerParameters(
            command=sys.argv[3], args=["mcp", "--standalone", "-c", sys.argv[4]]
        )
    else:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {sys.argv[4]}"})
        server = streamable_http_client(sys.argv[3], http_client=http)
    async with Client(
        server,
        mode=mode,
        cache=None,
        elicitation_callback=on_elicit,
        sampling_callback=on_sample,
    ) as client:
        seen = {"protocol": client.session.protocol_version, "calls": []}
        for name, args in tools:
            r = await client.call_tool(name, args)
            seen["calls"].append({"text": r.content[0].text, "isError": bool(r.is_error)})
    seen["asked"] = asked
    print(json.dumps(seen))


asyncio.run(main())

"""An agent with a profile, as the official Python SDK client (mcp 2.x) drives Corral.

    py_profile.py MODE stdio CORRAL_BIN CONFIG_FILE PROFILE   (corral mcp --profile PROFILE)
    py_profile.py MODE http URL TOKEN                         (URL ends in /mcp/PROFILE)

MODE is the SDK's `mode` ('2026-07-28', 'auto', 'legacy'). Lists the tools, calls ALLOWED
and then OUTSIDE (a tool the profile leaves out). Prints one JSON object with what it
saw: the protocol, the tool names, the allowed call's text and the refusal's message.
"""

import asyncio
import json
import sys

from mcp import StdioServerParameters
from mcp.client.client import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.exceptions import MCPError

ALLOWED, OUTSIDE = "a__echo", "m__echo"


async def main():
    mode, transport = sys.argv[1], sys.argv[2]
    if transport == "stdio":
        server = StdioServerParameters(
            command=sys.argv[3],
            args=["-c", sys.argv[4], "mcp", "--profile", sys.argv[5]],
        )
    else:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {sys.argv[4]}"})
        server = streamable_http_client(sys.argv[3], http_client=http)
    async with Client(server, mode=mode, cache=None) as client:
        seen = {"protocol": client.session.protocol_version}
        seen["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
        r = await client.call_tool(ALLOWED, {"text": "inside"})
        seen["allowed"] = r.content[0].text
        try:
            r = await client.call_tool(OUTSIDE, {"text": "outside"})
            seen["outside"] = {"answered": [c.text for c in r.content], "is_error": r.is_error}
        except MCPError as e:
            seen["outside"] = {"refused": e.error.message}
    print(json.dumps(seen))


asyncio.run(main())

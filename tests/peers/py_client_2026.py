"""Drives Corral with the official Python SDK client (mcp 2.x) in a given version mode.

    py_client_2026.py MODE stdio CORRAL_BIN CONFIG_FILE   (corral mcp --standalone)
    py_client_2026.py MODE http URL TOKEN

MODE is the SDK's `mode`: '2026-07-28' (pinned, no fallback), 'auto' or 'legacy'.
Lists and calls a tool of the fixture, lists/reads a resource and lists/gets a prompt of
server-everything. Prints one JSON object with what it saw; exits non-zero on failure.
"""

import asyncio
import json
import sys

from mcp import StdioServerParameters
from mcp.client.client import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


async def main():
    mode, transport = sys.argv[1], sys.argv[2]
    if transport == "stdio":
        server = StdioServerParameters(
            command=sys.argv[3], args=["mcp", "--standalone", "-c", sys.argv[4]]
        )
    else:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {sys.argv[4]}"})
        server = streamable_http_client(sys.argv[3], http_client=http)
    async with Client(server, mode=mode, cache=None) as client:
        seen = {"protocol": client.session.protocol_version}
        seen["tools"] = [t.name for t in (await client.list_tools()).tools]
        r = await client.call_tool("fx__echo", {"text": "from python 2026"})
        seen["echo"] = r.content[0].text
        resources = (await client.list_resources()).resources
        seen["resources"] = len(resources)
        read = await client.read_resource(resources[0].uri)
        seen["read"] = len(read.contents)
        prompts = (await client.list_prompts()).prompts
        plain = next(p for p in prompts if not any(a.required for a in (p.arguments or [])))
        got = await client.get_prompt(plain.name)
        seen["prompt"] = plain.name
        seen["prompt_messages"] = len(got.messages)
    print(json.dumps(seen))


asyncio.run(main())

"""A 2025 server's questions reaching the official Python client (mcp 2.x) pinned to
2026-07-28 as `input_required`, answered by its elicitation and sampling callbacks,
which its driver turns into the retry.

    py_client_input.py stdio CORRAL_BIN CONFIG_FILE   (corral mcp --standalone)
    py_client_input.py http URL TOKEN

Calls the fixture's (--conformance) test_elicitation and test_sampling. Prints one JSON
object with what it saw; exits non-zero on failure.
"""

import asyncio
import json
import sys

from mcp import StdioServerParameters, types
from mcp.client.client import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

seen = {"asked": []}


async def elicit(context, params):
    seen["asked"].append({"method": "elicitation/create", "message": params.message})
    return types.ElicitResult(
        action="accept", content={"username": "py-user", "email": "py@example.com"}
    )


async def sample(context, params):
    seen["asked"].append(
        {"method": "sampling/createMessage", "text": params.messages[0].content.text}
    )
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text="sampled by py"),
        model="py-model",
        stop_reason="endTurn",
    )


async def main():
    transport = sys.argv[1]
    if transport == "stdio":
        server = StdioServerParameters(
            command=sys.argv[2], args=["mcp", "--standalone", "-c", sys.argv[3]]
        )
    else:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {sys.argv[3]}"})
        server = streamable_http_client(sys.argv[2], http_client=http)
    async with Client(
        server,
        mode="2026-07-28",
        cache=None,
        elicitation_callback=elicit,
        sampling_callback=sample,
    ) as client:
        seen["protocol"] = client.session.protocol_version
        e = await client.call_tool("fx__test_elicitation", {"message": "who are you?"})
        seen["elicitation"] = {"text": e.content[0].text, "isError": bool(e.is_error)}
        s = await client.call_tool("fx__test_sampling", {"prompt": "say hi"})
        seen["sampling"] = {"text": s.content[0].text, "isError": bool(s.is_error)}
    print(json.dumps(seen))


asyncio.run(main())

"""Drives Corral as an agent does, with the official Python SDK client (mcp 2.x).

    py_client.py stdio CORRAL_BIN CONFIG_FILE     (corral mcp --standalone)
    py_client.py bridge CORRAL_BIN CONFIG_FILE    (corral mcp: through the project daemon)
    py_client.py http URL TOKEN

Lists tools, calls tools on two servers at once, receives progress from a real peer
(server-everything) and a tools/list_changed after the fixture changes its tools.
Prints one JSON object with what it saw; exits non-zero on any failure.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


async def scenario(read, write):
    list_changed = asyncio.Event()

    async def on_message(message):
        root = getattr(message, "root", message)
        if type(root).__name__ == "ToolListChangedNotification" or getattr(root, "method", "") == "notifications/tools/list_changed":
            list_changed.set()

    async with ClientSession(read, write, message_handler=on_message) as session:
        await session.initialize()
        names = [t.name for t in (await session.list_tools()).tools]

        slow, quick = await asyncio.gather(
            session.call_tool("fx__sleep", {"ms": 300}),
            session.call_tool("everything__echo", {"message": "from python"}),
        )

        progress = []

        async def on_progress(value, total, message):
            progress.append(value)

        long_op = await session.call_tool(
            "everything__trigger-long-running-operation",
            {"duration": 1, "steps": 3},
            progress_callback=on_progress,
        )

        list_changed.clear()
        await session.call_tool("fx__change_tools", {})
        await asyncio.wait_for(list_changed.wait(), timeout=20)
        after = []
        for _ in range(100):
            after = [t.name for t in (await session.list_tools()).tools]
            if "fx__extra" in after:
                break
            await asyncio.sleep(0.05)

        print(json.dumps({
            "tools": names,
            "slow": slow.content[0].text,
            "quick": quick.content[0].text,
            "progress": progress,
            "long_op_error": bool(long_op.is_error),
            "tools_after_change": after,
        }))


async def main():
    mode = sys.argv[1]
    if mode in ("stdio", "bridge"):
        args = ["-c", sys.argv[3], "mcp"] + (["--standalone"] if mode == "stdio" else [])
        params = StdioServerParameters(command=sys.argv[2], args=args)
        async with stdio_client(params) as (read, write):
            await scenario(read, write)
    elif mode == "http":
        client = create_mcp_http_client(headers={"Authorization": f"Bearer {sys.argv[3]}"})
        async with client:
            async with streamable_http_client(sys.argv[2], http_client=client) as streams:
                await scenario(streams[0], streams[1])
    else:
        raise SystemExit(f"unknown mode {mode}")


asyncio.run(main())

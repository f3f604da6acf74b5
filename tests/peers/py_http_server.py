"""A remote MCP server built with the official Python SDK (mcp 2.x), over HTTP on a
loopback port the OS picks. It prints one line, {"url": ...}, then serves until killed.

Usage: python py_http_server.py <mode>
  sse         the 2024-11-05 HTTP+SSE transport (GET /sse, POST /messages/)
  streamable  Streamable HTTP with sessions (/mcp)
  stateless   Streamable HTTP, stateless, JSON answers (/mcp)

Tools: those of py_server.py (greet {name}, multiply {a, b}).
"""

import json
import socket
import sys

import uvicorn

# The same server as over stdio (greet, multiply), served over HTTP here.
from py_server import server


def main() -> None:
    mode = sys.argv[1]
    if mode == "sse":
        app, path = server.sse_app(), "/sse"
    elif mode == "streamable":
        app, path = server.streamable_http_app(), "/mcp"
    else:
        app, path = server.streamable_http_app(stateless_http=True, json_response=True), "/mcp"
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    print(json.dumps({"url": f"http://127.0.0.1:{port}{path}"}), flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()

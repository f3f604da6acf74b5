"""A small MCP server built with the official Python SDK (mcp 2.x), used as a real peer."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("py-peer")


@server.tool()
def greet(name: str) -> str:
    """Greets someone by name."""
    return f"Hello, {name}!"


@server.tool()
def multiply(a: int, b: int) -> int:
    """Multiplies two integers."""
    return a * b


if __name__ == "__main__":
    server.run()

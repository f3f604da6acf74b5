"""An MCP server that fails at import, as a real Python server with a missing dependency does."""

import corral_missing_dependency  # noqa: F401  (raises ModuleNotFoundError on purpose)

from mcp.server.mcpserver import MCPServer

server = MCPServer("py-broken")

if __name__ == "__main__":
    server.run()

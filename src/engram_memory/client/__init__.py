"""The agent's side: `MemoryClient` turns "remember this" into correct capture and admission calls.

Built on any MCP client object with the SDK's `call_tool(name, arguments)` (`mcp.Client`,
`mcp.ClientSession`); imports nothing of the server.
"""

from engram_memory.client.memory import KINDS, EngramError, Memory, MemoryClient, Remembered, ToolCaller

__all__ = ["KINDS", "EngramError", "Memory", "MemoryClient", "Remembered", "ToolCaller"]

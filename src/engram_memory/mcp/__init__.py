"""The agent edge: tool list, trusted context, envelopes, and the MCP server."""

"""engram-memory: governed long-term memory for AI agents over MCP."""

__version__ = "0.1.0"

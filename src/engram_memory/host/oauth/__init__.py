"""engram-memory as an OAuth 2.1 authorization server for its own MCP endpoint (the SDK's handlers, this
host's decisions): people sign in, consent, and their clients' tokens are bindings the access rules decide."""

"""terminal-tools: an MCP server that gives AI agents a complete, fast and safe terminal."""

__version__ = "0.1.0"

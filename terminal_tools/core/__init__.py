"""The core: processes, jobs, buffers, analysis. Never imports FastMCP."""

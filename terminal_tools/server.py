"""Build the FastMCP application: tools, categories, lifespan. Nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastmcp import FastMCP
from fastmcp.server.lifespan import lifespan

from . import __version__
from .config import Settings
from .core.runtime import Runtime
from .tools import register_all

INSTRUCTIONS = """\
A terminal for agents. terminal_exec runs a command and waits (read semantic_status
first); a command that outlives auto_background_after_sec becomes a background job
whose output you follow with terminal_job_logs by byte offset. Output that does not fit
inline is available through output_handle and terminal_output_get. terminal_rg and
terminal_glob search files. Advanced tools: terminal_job_start and the terminal_pty_*
tools (persistent interactive bash).
"""

CATEGORIES = ("basic", "advanced")

# Runtimes of servers currently running in this process (signal handlers end them).
ACTIVE_RUNTIMES: set[Runtime] = set()


def build_server(settings: Settings | None = None, *, auth: Any = None) -> FastMCP:
    settings = settings or Settings()

    @lifespan
    async def runtime_lifespan(server: FastMCP) -> AsyncIterator[dict[str, Any]]:
        runtime = Runtime(settings)
        ACTIVE_RUNTIMES.add(runtime)
        await runtime.start()
        try:
            yield {"runtime": runtime}
        finally:
            ACTIVE_RUNTIMES.discard(runtime)
            await runtime.close()

    mcp = FastMCP(
        "terminal-tools",
        instructions=INSTRUCTIONS,
        version=__version__,
        lifespan=runtime_lifespan,
        auth=auth,
    )
    register_all(mcp)
    if settings.tools != "all":
        hidden = {c for c in CATEGORIES if c != settings.tools}
        mcp.disable(tags=hidden)
    return mcp


def kill_everything_now() -> None:
    for runtime in list(ACTIVE_RUNTIMES):
        runtime.kill_all_now()

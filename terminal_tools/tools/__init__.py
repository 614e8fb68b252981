"""Thin MCP adapters: validate input, call the core, return typed results."""

from __future__ import annotations

import os

from fastmcp import FastMCP

from . import exec as exec_tools
from . import jobs as job_tools
from . import search as search_tools

PTY_SUPPORTED = os.name == "posix"


def register_all(mcp: FastMCP) -> None:
    exec_tools.register(mcp)
    job_tools.register(mcp)
    search_tools.register(mcp)
    if PTY_SUPPORTED:
        # Imported here: the PTY module needs termios/fcntl, which Windows lacks.
        from . import pty as pty_tools

        pty_tools.register(mcp)

"""Thin MCP adapters: validate input, call the core, return typed results."""

from __future__ import annotations

from fastmcp import FastMCP

from . import exec as exec_tools
from . import jobs as job_tools
from . import search as search_tools


def register_all(mcp: FastMCP) -> None:
    exec_tools.register(mcp)
    job_tools.register(mcp)
    search_tools.register(mcp)

"""What every tool adapter needs from the request: the runtime and the default cwd."""

from __future__ import annotations

import asyncio
import contextlib
import os
from urllib.parse import unquote, urlparse

from fastmcp import Context
from fastmcp.exceptions import ToolError

from ..core.runtime import Runtime
from ..errors import UserError, printable


def runtime_of(ctx: Context) -> Runtime:
    runtime = ctx.lifespan_context.get("runtime")
    if runtime is None:
        raise ToolError("the server is not running (no runtime); restart it")
    return runtime


async def default_workdir(ctx: Context) -> str:
    """``--workdir`` if set; else the client's first MCP root; else the server's cwd."""
    runtime = runtime_of(ctx)
    if runtime.settings.workdir:
        return runtime.settings.workdir
    root = await _first_root(ctx, runtime)
    return root or runtime.server_cwd


_roots_cache: dict[str, str | None] = {}


async def _first_root(ctx: Context, runtime: Runtime) -> str | None:
    try:
        session = ctx.session
        capabilities = session.client_capabilities
    except Exception:
        return None
    if capabilities is None or getattr(capabilities, "roots", None) is None:
        return None
    key = f"{runtime.instance}/{ctx.session_id}"
    if key in _roots_cache:
        return _roots_cache[key]
    root = None
    with contextlib.suppress(Exception):
        result = await asyncio.wait_for(session.list_roots(), 2.0)
        for item in result.roots:
            path = _path_of(str(item.uri))
            if path and os.path.isdir(path):
                root = path
                break
    _roots_cache[key] = root
    return root


def _path_of(uri: str) -> str | None:
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return unquote(parsed.path) or None


def fail(exc: UserError) -> ToolError:
    return ToolError(printable(str(exc)))

"""What every tool adapter needs from the request: the runtime and the default cwd."""

from __future__ import annotations

import asyncio
import contextlib
import os
import warnings
import weakref
from urllib.parse import unquote, urlparse

from fastmcp import Context
from fastmcp.exceptions import ToolError

from ..core.runtime import Runtime

# Roots are deprecated in the newest protocol (SEP-2577) but are how handshake-era
# clients say where they work; asking for them is not the user's concern, so the SDK's
# warning about it stays off stderr.
warnings.filterwarnings("ignore", message="The roots capability is deprecated")


def runtime_of(ctx: Context) -> Runtime:
    runtime = ctx.lifespan_context.get("runtime")
    if runtime is None:
        raise ToolError("the server is not running (no runtime); restart it")
    return runtime


# The first root of each client session, asked once; kept per runtime, so it lives and
# dies with the server that asked (MCP state: the core never sees it).
_ROOTS: weakref.WeakKeyDictionary[Runtime, dict[str, str | None]] = weakref.WeakKeyDictionary()


async def default_workdir(ctx: Context) -> str:
    """The one default working directory of every tool and of server-info: ``--workdir``
    if set; else the client's first MCP root; else the server's cwd."""
    runtime = runtime_of(ctx)
    if not runtime.settings.workdir:
        root = await _first_root(ctx, runtime)
        if root:
            return root
    return runtime.default_workdir()


async def _first_root(ctx: Context, runtime: Runtime) -> str | None:
    try:
        session = ctx.session
        capabilities = session.client_capabilities
    except Exception:
        return None
    if capabilities is None or getattr(capabilities, "roots", None) is None:
        return None
    # One roots request per client session (sessions are stable on handshake-era
    # connections, where roots exist).
    cache = _ROOTS.setdefault(runtime, {})
    key = str(ctx.session_id)
    if key in cache:
        return cache[key]
    root = None
    with contextlib.suppress(Exception):
        result = await asyncio.wait_for(session.list_roots(), 2.0)
        for item in result.roots:
            path = _path_of(str(item.uri))
            if path and os.path.isdir(path):
                root = path
                break
    if len(cache) >= 256:
        cache.pop(next(iter(cache)))
    cache[key] = root
    return root


def _path_of(uri: str) -> str | None:
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return unquote(parsed.path) or None

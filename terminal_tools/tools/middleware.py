"""What every call passes through: argument errors in words an agent can act on, and a
quiet stderr for refusals (they are answers, not server faults)."""

from __future__ import annotations

import logging
import threading
from typing import Any

import mcp_types as mt
from fastmcp.exceptions import ToolError, ValidationError
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools.base import ToolResult
from pydantic import ValidationError as PydanticValidationError

from ..config import Settings
from ..core import owners
from ..errors import printable


class Scoping(Middleware):
    """Every request runs in its client's scope (see core/owners.py): over HTTP, the
    principal its token names, plus its MCP session unless sessions share."""

    def __init__(self, settings: Settings) -> None:
        self.share = settings.share_across_sessions

    async def on_request(
        self,
        context: MiddlewareContext[Any],
        call_next: CallNext[Any, Any],
    ) -> Any:
        with owners.serving(request_scope(self.share)):
            return await call_next(context)


def request_scope(share: bool) -> str | None:
    """None for a client that owns the whole process (stdio, in memory)."""
    from fastmcp.server.dependencies import get_access_token, get_http_request

    try:
        request = get_http_request()
    except RuntimeError:
        return None
    token = get_access_token()
    principal = token.client_id if token is not None else "anonymous"
    session = request.headers.get("mcp-session-id")
    if share or not session:
        # A stateless (2026-07-28) client has no session to scope by: its principal is.
        return principal
    return f"{principal}/{session}"


class ArgumentErrors(Middleware):
    """A bad argument gets one line per problem, naming the parameter, what was wrong and
    what was given; no pydantic internals (error codes, documentation links)."""

    async def on_call_tool(
        self,
        context: MiddlewareContext[mt.CallToolRequestParams],
        call_next: CallNext[mt.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        problem = _not_text(context.message.arguments or {})
        if problem:
            raise ToolError(
                printable(f"invalid argument for {context.message.name}: {problem}"),
                log_level=logging.INFO,
            )
        try:
            return await call_next(context)
        except ValidationError as exc:
            cause = exc.__cause__
            if not isinstance(cause, PydanticValidationError):
                raise
            text = describe_validation_error(context.message.name, cause)
            raise ToolError(text, log_level=logging.INFO) from None


def _not_text(value: Any, where: str = "") -> str | None:
    """Where a string holds a lone UTF-16 surrogate (JSON allows "\\ud800", JavaScript
    clients send it), which no program, file name or reply can carry: refused up front,
    before it can wedge a PTY session or fail deep inside a tool."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            char = value[exc.start]
            return (
                f"{where or 'argument'}: lone surrogate U+{ord(char):04X} at character "
                f"{exc.start} is not text; send valid Unicode"
            )
        return None
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        name = f"{where}.{key}" if where else str(key)
        problem = _not_text(key, f"{name} (the name)") or _not_text(item, name)
        if problem:
            return problem
    return None


def describe_validation_error(tool: str, error: PydanticValidationError) -> str:
    problems = []
    for detail in error.errors(include_url=False, include_context=False):
        where = ".".join(str(part) for part in detail.get("loc", ())) or "arguments"
        line = f"{where}: {detail.get('msg', 'invalid')}"
        if "input" in detail and not str(detail.get("type", "")).startswith("missing"):
            line += f" (got {_short(detail['input'])})"
        problems.append(line)
    noun = "argument" if len(problems) == 1 else "arguments"
    return printable(f"invalid {noun} for {tool}: " + "; ".join(problems))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class _QuietRefusals(logging.Filter):
    """FastMCP logs every refused call ('Invalid arguments for tool', 'Error calling tool')
    at WARNING/ERROR. A refusal is an answer the agent reads; show it only when the
    server's log level is INFO or lower. A crash (a record with a traceback) stays."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info or record.levelno >= logging.CRITICAL:
            return True
        message = str(record.msg)
        if message.startswith(("Invalid arguments for tool", "Error calling tool")):
            return logging.getLogger("terminal_tools").isEnabledFor(logging.INFO)
        return True


_FILTER = _QuietRefusals()


def quiet_refusals() -> None:
    """Install the filter on FastMCP's server logger (idempotent)."""
    logger = logging.getLogger("fastmcp.server.server")
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)


class InFlight(Middleware):
    """Counts the requests being served, so that a server whose stdin closed can let
    those it has read finish before it exits."""

    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()
        self.idle = threading.Event()
        self.idle.set()

    async def on_request(
        self,
        context: MiddlewareContext[Any],
        call_next: CallNext[Any, Any],
    ) -> Any:
        with self._lock:
            self._count += 1
            self.idle.clear()
        try:
            return await call_next(context)
        finally:
            with self._lock:
                self._count -= 1
                if self._count == 0:
                    self.idle.set()

"""Every tool result carries ``ended_jobs``: the caller's jobs that ended unseen.

A middleware rather than a line in each adapter, so that no result can miss it (a
refusal, a PTY reply, a tool added later). It runs after the tool: notices are taken
when the reply is ready, after a read or a signal in the same call has marked the end
it showed as seen (see ``core/notices.py``). A failed call takes nothing, so its
notices ride on the next result.
"""

from __future__ import annotations

from typing import Any

import mcp_types as mt
import pydantic_core
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools import ToolResult
from mcp_types import ContentBlock, TextContent

FIELD = "ended_jobs"


class EndedJobsMiddleware(Middleware):
    async def on_call_tool(
        self,
        context: MiddlewareContext[mt.CallToolRequestParams],
        call_next: CallNext[mt.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        # Runs inside the Scoping middleware: the notices taken are the caller's.
        result = await call_next(context)
        ctx = context.fastmcp_context
        if ctx is None or not isinstance(result, ToolResult) or result.is_error:
            return result
        payload = result.structured_content
        runtime = ctx.lifespan_context.get("runtime")
        if runtime is None or not isinstance(payload, dict) or FIELD not in payload:
            return result
        notices = runtime.jobs.take_notices()
        if not notices:
            return result  # the usual case: the reply goes out untouched
        payload[FIELD] = [notice.model_dump(mode="json") for notice in notices]
        return _with_text(result, payload)


def _with_text(result: ToolResult, payload: dict[str, Any]) -> ToolResult:
    """The same result with its text block re-serialized from the updated payload (the
    MCP specification asks that the text mirror the structured content)."""
    text = pydantic_core.to_json(payload).decode()
    content: list[ContentBlock] = [TextContent(type="text", text=text)]
    # model_construct: the payload is plain JSON data already (see results.py).
    return ToolResult.model_construct(content=content, structured_content=payload, meta=result.meta)

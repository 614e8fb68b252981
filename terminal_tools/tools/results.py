"""Results serialized once, for the tools whose answers can be large.

A tool that returns a pydantic model has FastMCP serialize it three times (to the text
block, to a JSON-able dict and back). For thousands of search matches or megabytes of
output that costs more than producing the answer, so terminal_exec, terminal_output_get,
terminal_job_logs and terminal_rg build the plain payload themselves, declare the
model's schema as their output schema, and return a ready ``ToolResult``. MCP clients
that check structured content validate it against that schema (the tests use one), so
the model stays the single description of each result.
"""

from __future__ import annotations

from typing import Any

import pydantic_core
from fastmcp.tools import Tool, ToolResult
from mcp_types import TextContent
from pydantic import BaseModel


def output_schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The output schema FastMCP would derive for a tool returning ``model``."""

    def returns_model() -> None: ...

    returns_model.__annotations__["return"] = model
    schema = Tool.from_function(returns_model).output_schema
    assert schema is not None, f"{model.__name__} has no object schema"
    return schema


def payload_of(model: type[BaseModel], source: object, **overrides: Any) -> dict[str, Any]:
    """The model's fields read off ``source`` (a core result with the same field names),
    with ``overrides`` for the ones the adapter computes."""
    return {
        name: overrides[name] if name in overrides else getattr(source, name)
        for name in model.model_fields
    }


def structured_model(result: BaseModel) -> ToolResult:
    """A model result, dumped to plain data once and serialized once."""
    return structured(result.model_dump(mode="json"))


def structured(payload: dict[str, Any]) -> ToolResult:
    """The payload as structured content, and the same JSON as the text block (as the MCP
    specification asks of tools with an output schema)."""
    text = pydantic_core.to_json(payload).decode()
    # model_construct: ToolResult() would serialize the payload and parse it back to
    # make it JSON-safe, which it already is (built from str, int, bool, None, lists
    # and dicts), and which costs more than the rest of the reply for a large result.
    return ToolResult.model_construct(
        content=[TextContent(type="text", text=text)], structured_content=payload
    )

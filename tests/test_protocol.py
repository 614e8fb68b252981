"""The public API as a client sees it: tool list, categories, schemas, annotations."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fastmcp import Client

from terminal_tools.config import Settings
from terminal_tools.server import build_server

from .conftest import call, make_client

pytestmark = pytest.mark.anyio

SNAPSHOT = Path(__file__).parent / "snapshots" / "list_tools.json"
BASIC = {"terminal_exec", "terminal_job_logs", "terminal_job_manage", "terminal_output_get",
         "terminal_rg", "terminal_glob"}
ADVANCED = {"terminal_job_start", "terminal_pty_open", "terminal_pty_run", "terminal_pty_close"}


def wire_tools(tools: list) -> list[dict]:
    """The listed tools as JSON, the way the snapshot pins them."""
    out = []
    for tool in sorted(tools, key=lambda t: t.name):
        data = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
        out.append({key: data[key] for key in ("name", "title", "description", "inputSchema",
                                               "outputSchema", "annotations", "_meta")
                    if key in data})
    return out


async def test_tool_list_matches_snapshot(client: Client) -> None:
    listed = wire_tools(await client.list_tools())
    if os.environ.get("UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(json.dumps(listed, indent=2, sort_keys=True) + "\n")
    assert listed == json.loads(SNAPSHOT.read_text()), (
        "the public tool API changed: review the diff, then regenerate with "
        "UPDATE_SNAPSHOTS=1 pytest tests/test_protocol.py"
    )


async def test_every_tool_has_typed_output_title_and_annotations(client: Client) -> None:
    for tool in await client.list_tools():
        assert tool.title, tool.name
        assert tool.output_schema and tool.output_schema.get("type") == "object", tool.name
        assert tool.annotations is not None, tool.name
        assert tool.annotations.read_only_hint is not None, tool.name
        assert tool.annotations.destructive_hint is not None, tool.name


async def test_read_tools_are_read_only_and_spawning_tools_destructive(client: Client) -> None:
    tools = {t.name: t for t in await client.list_tools()}
    for name in ("terminal_output_get", "terminal_job_logs"):
        assert tools[name].annotations.read_only_hint is True
        assert tools[name].annotations.open_world_hint is False
    for name in ("terminal_exec", "terminal_job_start"):
        assert tools[name].annotations.destructive_hint is True


@pytest.mark.parametrize("selection", ["basic", "advanced", "all"])
async def test_categories_decide_what_is_listed_and_callable(selection: str) -> None:
    async with make_client(tools=selection) as c:
        names = {t.name for t in await c.list_tools()}
        implemented = names  # every listed tool is a real one
        expected = {"basic": BASIC, "advanced": ADVANCED, "all": BASIC | ADVANCED}[selection]
        assert implemented <= expected
        assert implemented, "a category with no tools"
        hidden = (BASIC | ADVANCED) - expected
        for name in hidden & {"terminal_exec", "terminal_job_start"}:
            result = await c.call_tool(name, {"command": "true"}, raise_on_error=False)
            assert result.is_error and "Unknown tool" in result.content[0].text


async def test_structured_content_in_legacy_mode(legacy_client: Client) -> None:
    # Desktop and IDE clients speak the handshake-era protocol.
    result = await call(legacy_client, "terminal_exec", command="echo legacy")
    assert result["stdout"] == "legacy\n"
    assert result["semantic_status"] == "ok"


async def test_workdir_setting_is_the_default_cwd(tmp_path: Path) -> None:
    async with make_client(workdir=str(tmp_path)) as c:
        result = await call(c, "terminal_exec", command="pwd")
        assert result["stdout"].strip() == str(tmp_path)
        assert result["cwd"] == str(tmp_path)
        (tmp_path / "sub").mkdir()
        result = await call(c, "terminal_exec", command="pwd", cwd="sub")
        assert result["stdout"].strip() == str(tmp_path / "sub")


async def test_first_root_is_the_default_cwd_when_no_workdir(tmp_path: Path) -> None:
    server = build_server(Settings())
    async with Client(server, roots=[tmp_path.as_uri()], mode="legacy") as c:
        result = await call(c, "terminal_exec", command="pwd")
        assert result["cwd"] == str(tmp_path)


async def test_concurrent_calls_run_concurrently(client: Client) -> None:
    import time

    import anyio

    started = time.monotonic()
    results: list[dict] = []

    async def one() -> None:
        results.append(await call(client, "terminal_exec", command="sleep 0.5"))

    async with anyio.create_task_group() as group:
        for _ in range(8):
            group.start_soon(one)
    elapsed = time.monotonic() - started
    assert len(results) == 8 and all(r["exit_code"] == 0 for r in results)
    assert elapsed < 3.0, f"8 concurrent 0.5 s sleeps took {elapsed:.1f} s"

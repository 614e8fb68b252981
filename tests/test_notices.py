"""Notices of ended jobs: the next tool result tells the agent, once, that a job ended."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from fastmcp import Client

from .conftest import call, call_error

pytestmark = pytest.mark.anyio


async def glob(client: Client, root: Path) -> dict[str, Any]:
    return await call(client, "terminal_glob", pattern="*.txt", path=str(root))


async def notices_until(client: Client, root: Path, timeout: float = 15) -> list[dict[str, Any]]:
    """Call an unrelated tool until a result carries notices; return them."""
    with anyio.fail_after(timeout):
        while True:
            notices = (await glob(client, root))["ended_jobs"]
            if notices:
                return notices
            await anyio.sleep(0.05)


async def test_unpolled_job_end_rides_on_the_next_call_and_only_that_one(
    client: Client, tmp_path: Path
) -> None:
    started = await call(
        client, "terminal_job_start", command="bash -c 'sleep 0.3; echo out; echo err >&2; exit 3'"
    )
    assert started["ended_jobs"] == []
    (notice,) = await notices_until(client, tmp_path)
    assert notice == {
        "job_id": started["job_id"],
        "name": None,
        "command": "bash -c 'sleep 0.3; echo out; echo err >&2; exit 3'",
        "status": "exited",
        "end_reason": "exit",
        "exit_code": 3,
        "semantic_status": "error",
        "semantic_message": notice["semantic_message"],
        "runtime_ms": notice["runtime_ms"],
        "stdout_bytes": 4,
        "stderr_bytes": 4,
        "read_with": f"terminal_job_logs(job_id='{started['job_id']}', tail=true)",
    }
    assert notice["runtime_ms"] >= 250
    assert (await glob(client, tmp_path))["ended_jobs"] == []
    # The job itself is still there to read.
    page = await call(client, "terminal_job_logs", job_id=started["job_id"], tail=True)
    assert page["data"] == "out\n" and page["exit_code"] == 3


async def test_job_whose_end_was_read_is_never_announced(client: Client, tmp_path: Path) -> None:
    started = await call(client, "terminal_job_start", command="bash -c 'sleep 0.2; exit 1'")
    page = await call(
        client, "terminal_job_logs", job_id=started["job_id"], wait_until_exit=True,
        wait_timeout_sec=10,
    )
    assert page["status"] == "exited" and page["ended_jobs"] == []
    await anyio.sleep(0.3)
    assert (await glob(client, tmp_path))["ended_jobs"] == []


async def test_job_read_after_it_ended_is_not_announced(client: Client, tmp_path: Path) -> None:
    started = await call(client, "terminal_job_start", command="true")
    await anyio.sleep(0.5)  # it has ended, unseen: a notice is pending
    page = await call(client, "terminal_job_logs", job_id=started["job_id"])
    assert page["status"] == "exited"
    # The read showed the end, so neither it nor any later result announces it.
    assert page["ended_jobs"] == []
    assert (await glob(client, tmp_path))["ended_jobs"] == []


async def test_job_ended_by_a_signal_is_not_announced(client: Client, tmp_path: Path) -> None:
    started = await call(client, "terminal_job_start", command="sleep 30")
    managed = await call(
        client, "terminal_job_manage", action="signal_kill", job_id=started["job_id"]
    )
    assert managed["exited"] is True and managed["ended_jobs"] == []
    await anyio.sleep(0.2)
    assert (await glob(client, tmp_path))["ended_jobs"] == []


async def test_job_shown_ended_by_list_is_not_announced(client: Client, tmp_path: Path) -> None:
    started = await call(client, "terminal_job_start", command="true")
    await anyio.sleep(0.5)
    listed = await call(client, "terminal_job_manage", action="list")
    (info,) = [j for j in listed["jobs"] if j["job_id"] == started["job_id"]]
    assert info["status"] == "exited" and listed["ended_jobs"] == []
    assert (await glob(client, tmp_path))["ended_jobs"] == []


async def test_promoted_exec_command_is_announced_when_it_ends(
    client: Client, tmp_path: Path
) -> None:
    result = await call(
        client, "terminal_exec", command="bash -c 'sleep 0.6; echo late'",
        auto_background_after_sec=0.2,
    )
    assert result["auto_backgrounded"] is True
    (notice,) = await notices_until(client, tmp_path)
    assert notice["job_id"] == result["job_id"]
    assert notice["exit_code"] == 0 and notice["semantic_status"] == "ok"
    assert notice["stdout_bytes"] == len("late\n")


async def test_deadline_kill_is_announced_as_timed_out(client: Client, tmp_path: Path) -> None:
    started = await call(client, "terminal_job_start", command="sleep 30", timeout_sec=0.3)
    (notice,) = await notices_until(client, tmp_path)
    assert notice["job_id"] == started["job_id"]
    assert notice["status"] == "exited" and notice["end_reason"] == "timeout"
    assert notice["semantic_status"] == "error"


async def test_a_failed_call_keeps_the_notice_for_the_next_result(
    client: Client, tmp_path: Path
) -> None:
    started = await call(client, "terminal_job_start", command="true")
    await anyio.sleep(0.5)
    await call_error(client, "terminal_job_logs", job_id="job_nosuch")
    (notice,) = (await glob(client, tmp_path))["ended_jobs"]
    assert notice["job_id"] == started["job_id"]


async def test_long_commands_are_cut_in_the_notice(client: Client, tmp_path: Path) -> None:
    command = "true " + "x" * 300
    await call(client, "terminal_job_start", command=command)
    (notice,) = await notices_until(client, tmp_path)
    assert len(notice["command"]) == 120 and notice["command"].endswith("...")
    assert command.startswith(notice["command"][:-3])


async def test_every_tool_declares_ended_jobs_in_its_output_schema(client: Client) -> None:
    for tool in await client.list_tools():
        assert tool.output_schema is not None, tool.name
        assert "ended_jobs" in tool.output_schema["properties"], tool.name


async def test_the_text_block_mirrors_the_notice(client: Client, tmp_path: Path) -> None:
    import json

    started = await call(client, "terminal_job_start", command="true")
    await anyio.sleep(0.5)
    result = await client.call_tool("terminal_glob", {"pattern": "*.txt", "path": str(tmp_path)})
    assert result.structured_content["ended_jobs"][0]["job_id"] == started["job_id"]
    assert json.loads(result.content[0].text) == result.structured_content

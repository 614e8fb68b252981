"""Input no program can receive is refused up front, naming the parameter, and nothing
is left in a bad state: the session, the server and later calls carry on."""

from __future__ import annotations

from typing import Any

import pytest
from fastmcp import Client

from .conftest import call, call_error

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("arguments,where", [
    ({"command": "echo \ud800"}, "command"),
    ({"command": "echo \udc80\ud800"}, "command"),
    ({"command": "cat", "stdin": "a\udc80"}, "stdin"),
    ({"command": "echo hi", "env": {"A": "\ud800"}}, "env.A"),
    ({"command": "echo hi", "cwd": "\ud800"}, "cwd"),
])
async def test_a_lone_surrogate_is_refused_by_name(
    client: Client, arguments: dict[str, Any], where: str
) -> None:
    error = await call_error(client, "terminal_exec", **arguments)
    assert "lone surrogate" in error and where in error, error
    assert (await call(client, "terminal_exec", command="echo fine"))["stdout"] == "fine\n"


@pytest.mark.parametrize("field", ["command", "raw_send"])
async def test_a_lone_surrogate_leaves_a_pty_session_usable(client: Client, field: str) -> None:
    session = (await call(client, "terminal_pty_open"))["session_id"]
    try:
        error = await call_error(client, "terminal_pty_run", session_id=session,
                                 **{field: "echo \ud800"})
        assert "lone surrogate" in error, error
        ran = await call(client, "terminal_pty_run", session_id=session, command="echo next")
        assert "next" in ran["output"] and ran["exit_code"] == 0, ran
    finally:
        await call(client, "terminal_pty_close", session_id=session)


async def test_search_patterns_with_a_lone_surrogate_are_refused(client: Client) -> None:
    error = await call_error(client, "terminal_rg", pattern="x\ud800")
    assert "lone surrogate" in error and "pattern" in error


@pytest.mark.parametrize("limits", [
    {"fsize_mb": 2**60}, {"cpu_sec": 2**64}, {"rss_mb": 2**44}, {"nofile": 2**50},
])
async def test_limits_past_what_ulimit_accepts_are_refused(
    client: Client, limits: dict[str, int]
) -> None:
    error = await call_error(client, "terminal_exec", command="echo hi", limits=limits)
    assert next(iter(limits)) in error and "less than or equal" in error, error


async def test_the_largest_accepted_limits_still_run_the_command(client: Client) -> None:
    result = await call(client, "terminal_exec", command="echo hi", limits={
        "fsize_mb": 2**30, "cpu_sec": 10**8, "rss_mb": 2**30, "nofile": 1024})
    assert result["exit_code"] == 0 and result["stdout"] == "hi\n", result


@pytest.mark.parametrize("command", ["true", "exec 0<&-; echo closed-stdin"])
async def test_a_command_that_does_not_read_its_stdin_still_runs_and_is_tracked(
    client: Client, command: str
) -> None:
    result = await call(client, "terminal_exec", command=command, stdin="x" * 1_000_000)
    assert result["exit_code"] == 0 and result["pid"] is not None, result
    assert result.get("error") is None


async def test_a_command_that_closes_stdin_early_still_meets_its_deadline(
    client: Client,
) -> None:
    result = await call(client, "terminal_exec", command="exec 0<&-; sleep 30",
                        stdin="x" * 1_000_000, timeout_sec=2)
    assert result["timed_out"] is True and result["pid"] is not None, result

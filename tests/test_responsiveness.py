"""No call stalls another: while one client's call does expensive work (a huge command, a
pathological regex, a flood of PTY output), another client's terminal_exec still answers
at once. Bounds are generous (the machine is shared); a stalled event loop shows up as
seconds, not tens of milliseconds."""

from __future__ import annotations

import asyncio
import functools
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import pytest
from fastmcp import Client

from terminal_tools.config import Settings
from terminal_tools.server import build_server

from .conftest import call

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024
ANSWER_WITHIN = 0.1  # seconds: the bound for a concurrent call, taken as a median


@pytest.fixture
async def two_clients() -> AsyncIterator[tuple[Client, Client]]:
    server = build_server(
        Settings(output_search_timeout_sec=2.0, regex_timeout_sec=0.5)
    )
    async with Client(server) as busy, Client(server) as other:
        await call(other, "terminal_exec", command="true")  # warm both sessions up
        yield busy, other


async def latencies_while(work: Awaitable[Any], other: Client) -> tuple[Any, list[float]]:
    """Run ``work``; meanwhile time ``terminal_exec("true")`` calls from ``other``."""
    task = asyncio.ensure_future(work)
    await asyncio.sleep(0.05)  # let the expensive call get going
    latencies: list[float] = []
    while not task.done():
        started = time.monotonic()
        result = await call(other, "terminal_exec", command="true")
        latencies.append(time.monotonic() - started)
        assert result["exit_code"] == 0
    return await task, latencies


def assert_answered_promptly(latencies: list[float]) -> None:
    """A stalled loop shows as seconds. The bound is the issue's 100 ms, widened on a
    machine already so loaded that an idle server's answers come slowly (shared CI)."""
    assert latencies, "the expensive call finished before any other call was timed"
    bound = max(ANSWER_WITHIN, 4 * _idle_latency())
    assert statistics.median(latencies) < bound, (bound, latencies)


@functools.cache
def _idle_latency() -> float:
    """The median time of terminal_exec("true") on an idle server, measured in a child
    process so that nothing of this test's own server interferes."""
    script = (
        "import asyncio, statistics, time\n"
        "from fastmcp import Client\n"
        "from terminal_tools.server import build_server\n"
        "async def main():\n"
        "    async with Client(build_server()) as c:\n"
        "        times = []\n"
        "        for _ in range(7):\n"
        "            t = time.monotonic()\n"
        "            await c.call_tool('terminal_exec', {'command': 'true'})\n"
        "            times.append(time.monotonic() - t)\n"
        "        print(statistics.median(times))\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    return float(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("tool,extra", [
    ("terminal_exec", {}),
    ("terminal_job_start", {}),
])
async def test_a_command_longer_than_the_os_can_start_is_refused_at_once(
    client: Client, tool: str, extra: dict[str, Any]
) -> None:
    started = time.monotonic()
    result = await client.call_tool(
        tool, {"command": "echo " + "a" * MIB, **extra}, raise_on_error=False
    )
    elapsed = time.monotonic() - started
    text = result.content[0].text if result.is_error else result.structured_content["error"]
    assert "longest command this OS can start" in text and "1,048,581 bytes" in text, text
    assert elapsed < 2.0, f"refusing a 1 MiB command took {elapsed:.2f} s"


async def test_a_pty_command_longer_than_the_os_can_start_is_refused_at_once(
    client: Client,
) -> None:
    session = await call(client, "terminal_pty_open")
    started = time.monotonic()
    result = await client.call_tool(
        "terminal_pty_run",
        {"session_id": session["session_id"], "command": "echo " + "a" * MIB},
        raise_on_error=False,
    )
    assert time.monotonic() - started < 2.0
    text = result.content[0].text if result.is_error else str(result.structured_content)
    assert "longest command this OS can start" in text, text
    # The session is still usable.
    ran = await call(client, "terminal_pty_run", session_id=session["session_id"],
                     command="echo still-here")
    assert "still-here" in ran["output"]


async def test_analysing_the_largest_command_does_not_stall_other_clients(
    two_clients: tuple[Client, Client],
) -> None:
    busy, other = two_clients
    # Just under the OS limit: the analysis of this takes a few hundred milliseconds.
    command = "echo" + " a" * 60_000 + " | wc -w"
    result, latencies = await latencies_while(
        call(busy, "terminal_exec", command=command), other
    )
    assert result["stdout"].strip() == "60000"
    assert_answered_promptly(latencies)


@pytest.mark.parametrize("command", [
    "cat " + ")" * 40_000,  # tree-sitter-bash's parse of these is quadratic, in C
    "cat " + "<" * 65_536,
])
async def test_a_command_too_costly_to_analyse_is_refused_and_stalls_no_one(
    two_clients: tuple[Client, Client], command: str
) -> None:
    busy, other = two_clients
    started = time.monotonic()
    result, latencies = await latencies_while(
        call(busy, "terminal_exec", command=command), other
    )
    assert result["exit_code"] is None
    assert "could not be analysed within 2 s" in result["error"], result["error"]
    assert time.monotonic() - started < 2.0 + 5.0
    assert_answered_promptly(latencies)


async def test_a_pathological_output_pattern_is_bounded_and_stalls_no_one(
    two_clients: tuple[Client, Client],
) -> None:
    busy, other = two_clients
    ran = await call(busy, "terminal_exec", max_output_kb=1,
                     command="for i in $(seq 50); do printf 'a%.0s' $(seq 40); echo b; done; "
                             "echo findable")
    assert ran["output_handle"], ran
    started = time.monotonic()
    page, latencies = await latencies_while(
        call(busy, "terminal_output_get", output_handle=ran["output_handle"],
             pattern="(a|aa)+$"),
        other,
    )
    elapsed = time.monotonic() - started
    assert page["truncated"] == "timeout", page
    assert "time limit" in page["message"]
    assert page["next_offset"] < page["total_bytes"]  # where to continue from
    assert elapsed < 2.0 + 5.0, f"the 2 s search limit took {elapsed:.1f} s"
    assert_answered_promptly(latencies)
    # An ordinary pattern over the same output still finds what it asks for.
    found = await call(busy, "terminal_output_get", output_handle=ran["output_handle"],
                       pattern="^findable$")
    assert [m["text"] for m in found["matches"]] == ["findable"]
    assert found["truncated"] is None


async def test_a_pathological_wait_for_pattern_gives_up_and_stalls_no_one(
    two_clients: tuple[Client, Client],
) -> None:
    busy, other = two_clients
    job = await call(busy, "terminal_job_start",
                     command="for i in $(seq 50); do printf 'a%.0s' $(seq 40); echo b; done; "
                             "sleep 30")
    try:
        await asyncio.sleep(0.3)
        started = time.monotonic()
        logs, latencies = await latencies_while(
            call(busy, "terminal_job_logs", job_id=job["job_id"], wait_for="(a|aa)+$",
                 wait_timeout_sec=20),
            other,
        )
        elapsed = time.monotonic() - started
        assert logs["matched"] is False
        assert any("wait_for gave up" in note for note in logs["notes"]), logs["notes"]
        assert elapsed < 10.0, f"the wait took {elapsed:.1f} s for a 0.5 s regex limit"
        assert_answered_promptly(latencies)
    finally:
        await call(busy, "terminal_job_manage", action="signal_kill", job_id=job["job_id"])


async def test_a_flood_of_pty_output_stalls_no_one(two_clients: tuple[Client, Client]) -> None:
    busy, other = two_clients
    session = await call(busy, "terminal_pty_open")
    try:
        result, latencies = await latencies_while(
            call(busy, "terminal_pty_run", session_id=session["session_id"],
                 command="head -c 3000000 /dev/zero | tr '\\0' 'x' | fold -w 200; echo done",
                 timeout_sec=60),
            other,
        )
        assert result["exit_code"] == 0, result
        assert_answered_promptly(latencies)
    finally:
        await call(busy, "terminal_pty_close", session_id=session["session_id"])


async def test_rendering_a_screen_full_of_costly_sequences_is_bounded(
    two_clients: tuple[Client, Client],
) -> None:
    busy, other = two_clients
    session = await call(busy, "terminal_pty_open")
    try:
        # ESC # 8 fills the whole screen with E: cheap to send, costly to emulate.
        await call(busy, "terminal_pty_run", session_id=session["session_id"],
                   command="python3 -c \"import sys; sys.stdout.write('\\x1b#8' * 22000)\"")
        started = time.monotonic()
        result, latencies = await latencies_while(
            call(busy, "terminal_pty_run", session_id=session["session_id"],
                 read_only=True, screen=True),
            other,
        )
        assert time.monotonic() - started < 10.0
        assert result["screen"] is not None
        assert latencies and statistics.median(latencies) < 0.5, latencies
        # The session still renders an ordinary screen afterwards.
        ran = await call(busy, "terminal_pty_run", session_id=session["session_id"],
                         command="clear; echo visible-line", screen=True)
        assert "visible-line" in ran["screen"], ran["screen"]
    finally:
        await call(busy, "terminal_pty_close", session_id=session["session_id"])


@pytest.mark.parametrize("tool,arguments", [
    ("terminal_output_get", {"pattern": "(?:(?:a{1000}){1000}){10}"}),
    ("terminal_job_logs", {"wait_for": "(?:(?:a{1000}){1000}){10}"}),
])
async def test_a_pattern_too_costly_to_compile_is_refused_at_once(
    client: Client, tool: str, arguments: dict[str, Any]
) -> None:
    if tool == "terminal_output_get":
        ran = await call(client, "terminal_exec", command="seq 2000", max_output_kb=1)
        target = {"output_handle": ran["output_handle"]}
    else:
        job = await call(client, "terminal_job_start", command="echo hi")
        target = {"job_id": job["job_id"]}
    started = time.monotonic()
    result = await client.call_tool(tool, {**target, **arguments}, raise_on_error=False)
    assert result.is_error
    assert "expand to 10,000,000 copies" in result.content[0].text, result.content[0].text
    assert time.monotonic() - started < 2.0

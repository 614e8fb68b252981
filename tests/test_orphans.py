"""No process outlives its command: detached, mark-stripping and respawning children on
every end path, with each containment the host offers (issue: orphans)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import psutil
import pytest
from fastmcp import Client

from .conftest import call, make_client, marked_alive, new_mark, stdio_transport, wait_until_gone

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux containment"),
]


def _end_marked(mark: str) -> None:
    """Whatever the outcome, leave nothing behind (a surviving respawner would fill the
    machine): stop every marked process, then kill them, until none is left."""
    for _ in range(20):
        found = marked_alive(mark)
        if not found:
            return
        for proc in found:
            with contextlib.suppress(psutil.Error):
                proc.suspend()
        for proc in found:
            with contextlib.suppress(psutil.Error):
                proc.kill()


def escapees(mark: str) -> str:
    """Shell code that leaves, in the background, four processes that try to survive:
    one detached with an empty environment (no owner mark), one detached without the
    owner mark, a respawner that ignores SIGTERM and forks new detached children every
    50 ms, and one that forks a new detached child when it receives SIGTERM."""
    m = f"TT_TEST_MARK={mark}"
    loop = f"while :; do (setsid env -i {m} sleep 300 &); sleep 0.05; done"
    on_term = f"(setsid env -i {m} sleep 300 &)"
    return (
        f"(setsid env -i {m} sleep 300 &); "
        "env -u TERMINAL_TOOLS_OWNER setsid sleep 300 > /dev/null 2>&1 & "
        f"(setsid env -i {m} bash -c 'trap \"\" TERM; {loop}' > /dev/null 2>&1 &); "
        f"(setsid env -i {m} bash -c 'trap \"{on_term}\" TERM; while :; do sleep 0.1; done'"
        " > /dev/null 2>&1 &); "
        "sleep 0.6"
    )


async def _info(c: Client) -> dict[str, Any]:
    return json.loads((await c.read_resource("terminal://server-info"))[0].text)


async def _started(mark: str) -> None:
    # The four escapees and at least one child of the respawner exist.
    with anyio.move_on_after(15):
        while len(marked_alive(mark)) < 5:
            await anyio.sleep(0.05)
    assert len(marked_alive(mark)) >= 5, "the escapees did not start"


Path = Callable[[Client, str, dict[str, Any]], Awaitable[None]]


async def _exit(c: Client, mark: str, info: dict[str, Any]) -> None:
    result = await call(c, "terminal_exec", command=escapees(mark) + "; echo done",
                        env={"TT_TEST_MARK": mark})
    assert result["stdout"] == "done\n"
    note = " ".join(result["notes"])
    assert "left running" in note and "sleep" in note and "terminal_job_start" in note, note


async def _timeout(c: Client, mark: str, info: dict[str, Any]) -> None:
    result = await call(c, "terminal_exec", command=escapees(mark) + "; sleep 300",
                        env={"TT_TEST_MARK": mark}, timeout_sec=3)
    assert result["timed_out"]


async def _job(c: Client, mark: str, action: str) -> None:
    job = await call(c, "terminal_job_start", command=escapees(mark) + "; sleep 300",
                     env={"TT_TEST_MARK": mark})
    await _started(mark)
    await call(c, "terminal_job_manage", action=action, job_id=job["job_id"])


async def _kill_action(c: Client, mark: str, info: dict[str, Any]) -> None:
    await _job(c, mark, "signal_kill")


async def _term_action(c: Client, mark: str, info: dict[str, Any]) -> None:
    await _job(c, mark, "signal_term")


async def _cancel(c: Client, mark: str, info: dict[str, Any]) -> None:
    async with anyio.create_task_group() as group:
        async def run() -> None:
            await c.call_tool("terminal_exec", {"command": escapees(mark) + "; sleep 300",
                                                "env": {"TT_TEST_MARK": mark}})
        group.start_soon(run)
        await _started(mark)
        group.cancel_scope.cancel()


async def _pty_close(c: Client, mark: str, info: dict[str, Any]) -> None:
    session = (await call(c, "terminal_pty_open", env={"TT_TEST_MARK": mark}))["session_id"]
    await call(c, "terminal_pty_run", session_id=session, command=escapees(mark))
    await _started(mark)
    await call(c, "terminal_pty_close", session_id=session)


async def _running_job(c: Client, mark: str) -> None:
    await call(c, "terminal_job_start", command=escapees(mark) + "; sleep 300",
               env={"TT_TEST_MARK": mark})
    await _started(mark)


def _server(info: dict[str, Any]) -> psutil.Process:
    return psutil.Process(int(info["instance"].split(".")[0]))


PATHS: dict[str, Path] = {
    "exit": _exit,
    "timeout": _timeout,
    "kill action": _kill_action,
    "term action": _term_action,
    "cancel": _cancel,
    "pty close": _pty_close,
}
SERVER_ENDS = ["shutdown", "server SIGKILL", "watchdog death, then server SIGKILL"]
CONTAINMENTS = ["auto", "subreaper"]


@pytest.mark.stdio
@pytest.mark.parametrize("containment", CONTAINMENTS)
@pytest.mark.parametrize("path", [*PATHS, *SERVER_ENDS])
async def test_no_escapee_outlives_its_command(containment: str, path: str) -> None:
    mark = new_mark()
    try:
        await _end_path(containment, path, mark)
    finally:
        _end_marked(mark)


async def _end_path(containment: str, path: str, mark: str) -> None:
    transport = stdio_transport(env={"TERMINAL_TOOLS_CONTAINMENT": containment})
    try:
        async with Client(transport) as c:
            info = await _info(c)
            assert info["containment"]["kind"] in ("cgroup", "subreaper"), info["containment"]
            if path in PATHS:
                await PATHS[path](c, mark, info)
                survivors = await wait_until_gone(mark, timeout=10)
                assert not survivors, [p.cmdline() for p in survivors]
                assert (await call(c, "terminal_exec", command="echo alive"))["exit_code"] == 0
                return
            await _running_job(c, mark)
            if path == "shutdown":
                pass  # leaving the block closes the server's stdin
            else:
                server = _server(info)
                if path.startswith("watchdog"):
                    psutil.Process(info["watchdog_pid"]).kill()
                    with anyio.move_on_after(10):
                        while (await _info(c))["watchdog_restarts"] < 1:
                            await anyio.sleep(0.05)
                    after = await _info(c)
                    assert after["watchdog_restarts"] == 1, after
                    assert after["watchdog_pid"] not in (None, info["watchdog_pid"])
                server.send_signal(signal.SIGKILL)
                server.wait(10)
    except Exception:
        if path in PATHS or path == "shutdown":
            raise  # a SIGKILLed server ends the client session with an error
    survivors = await wait_until_gone(mark, timeout=15)
    assert not survivors, [p.cmdline() for p in survivors]


async def test_a_commands_leftovers_are_ended_every_time() -> None:
    # The rule, twenty times in a row: what a foreground command leaves running (a
    # detached `setsid x > log 2>&1 &`, a plain `x &`) ends when it exits, and notes says
    # which processes and where services belong.
    async with make_client() as c:
        for attempt in range(20):
            mark = new_mark()
            result = await call(
                c, "terminal_exec", env={"TT_TEST_MARK": mark},
                command="setsid sleep 300 > /dev/null 2>&1 & sleep 301 > /dev/null 2>&1 & "
                        "echo started")
            assert result["stdout"] == "started\n"
            note = " ".join(result["notes"])
            # Named as they were when ended (a child caught before its exec is still
            # "bash" or "setsid").
            assert "ended 2 process(es)" in note and note.count("(pid ") == 2, (attempt, note)
            assert "terminal_job_start" in note
            assert not await wait_until_gone(mark, timeout=5), attempt


async def test_server_info_names_the_containment_and_a_weaker_one_is_said_so() -> None:
    async with make_client(containment="marks") as c:
        info = await _info(c)
        assert info["containment"]["kind"] == "marks"
        assert "TERMINAL_TOOLS_OWNER" in info["containment"]["detail"]
        assert isinstance(info["watchdog_pid"], int) and info["watchdog_restarts"] == 0


@pytest.mark.stdio
async def test_a_dead_watchdog_is_replaced_and_counted() -> None:
    async with Client(stdio_transport()) as c:
        info = await _info(c)
        first = info["watchdog_pid"]
        assert first is not None
        os.kill(first, signal.SIGKILL)
        with anyio.move_on_after(10):
            while (await _info(c))["watchdog_restarts"] < 1:
                await anyio.sleep(0.05)
        after = await _info(c)
        assert after["watchdog_restarts"] == 1 and after["watchdog_pid"] not in (None, first)
        assert psutil.Process(after["watchdog_pid"]).is_running()

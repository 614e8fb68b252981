"""Reliability: no orphans on any path, bounded memory, load, and a bad-input matrix."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import psutil
import pytest
from fastmcp import Client

from .conftest import call, make_client, new_mark, stdio_transport, wait_until_gone

pytestmark = pytest.mark.anyio

# A tree with a backgrounded child and a child that left the process group (setsid).
TREE = "bash -c 'sleep 300 & setsid sleep 300 & sleep 300; wait'"


async def _exec_timeout(c: Client, env: dict) -> None:
    result = await call(c, "terminal_exec", command=TREE, timeout_sec=1, env=env)
    assert result["timed_out"]


async def _job_signal(c: Client, env: dict) -> None:
    job = await call(c, "terminal_job_start", command=TREE, env=env)
    await asyncio.sleep(0.3)
    await call(c, "terminal_job_manage", action="signal_term", job_id=job["job_id"])


async def _job_kill(c: Client, env: dict) -> None:
    job = await call(c, "terminal_job_start", command=TREE, env=env)
    await asyncio.sleep(0.3)
    await call(c, "terminal_job_manage", action="signal_kill", job_id=job["job_id"])


async def _job_deadline(c: Client, env: dict) -> None:
    job = await call(c, "terminal_job_start", command=TREE, env=env, timeout_sec=1)
    page = await call(c, "terminal_job_logs", job_id=job["job_id"], wait_until_exit=True,
                      wait_timeout_sec=20)
    assert page["status"] == "exited" and page["end_reason"] == "timeout"


async def _promoted_deadline(c: Client, env: dict) -> None:
    result = await call(c, "terminal_exec", command=TREE, env=env, timeout_sec=2,
                        auto_background_after_sec=0.5)
    assert result["auto_backgrounded"]
    await call(c, "terminal_job_logs", job_id=result["job_id"], wait_until_exit=True)


async def _pty_close(c: Client, env: dict) -> None:
    session = (await call(c, "terminal_pty_open", env=env))["session_id"]
    await call(c, "terminal_pty_run", session_id=session, command=TREE + " &")
    await asyncio.sleep(0.3)
    await call(c, "terminal_pty_close", session_id=session)


async def _exec_cancelled(c: Client, env: dict) -> None:
    with anyio.move_on_after(1.0):
        await c.call_tool("terminal_exec", {"command": TREE, "env": env})


async def _exec_leaves_background(c: Client, env: dict) -> None:
    result = await call(c, "terminal_exec", env=env,
                        command="sleep 300 > /dev/null 2>&1 & setsid sleep 300 & echo started")
    assert result["exit_code"] == 0


PATHS: dict[str, Callable[[Client, dict], Awaitable[None]]] = {
    "exec timeout": _exec_timeout,
    "exec cancelled by the client": _exec_cancelled,
    "exec leaving background processes": _exec_leaves_background,
    "job signal_term": _job_signal,
    "job signal_kill": _job_kill,
    "job deadline": _job_deadline,
    "promoted job deadline": _promoted_deadline,
    "pty close": _pty_close,
}


@pytest.mark.parametrize("path", list(PATHS))
async def test_no_orphans(path: str) -> None:
    mark = new_mark()
    async with make_client() as c:
        await PATHS[path](c, {"TT_TEST_MARK": mark})
        survivors = await wait_until_gone(mark, timeout=10)
        assert not survivors, f"{path}: {[p.cmdline() for p in survivors]}"


async def test_no_orphans_after_client_disconnect() -> None:
    mark = new_mark()
    async with make_client() as c:
        env = {"TT_TEST_MARK": mark}
        await call(c, "terminal_job_start", command=TREE, env=env)
        await call(c, "terminal_exec", command=TREE, env=env, auto_background_after_sec=0.3)
        session = (await call(c, "terminal_pty_open", env=env))["session_id"]
        await call(c, "terminal_pty_run", session_id=session, command=TREE + " &")
    assert not await wait_until_gone(mark, timeout=10)


# -- memory ------------------------------------------------------------------------------

RSS_CEILING = 200 * 1024 * 1024  # stated in the README


class PeakRss:
    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.peak = 0
        self._stop = False

    async def run(self) -> None:
        while not self._stop:
            try:
                self.peak = max(self.peak, self.process.memory_info().rss)
            except psutil.Error:
                return
            await asyncio.sleep(0.02)


def _server_pid() -> int:
    for child in psutil.Process().children(recursive=True):
        try:
            line = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if "-m terminal_tools" in line:
            return child.pid
    raise AssertionError("server process not found")


@pytest.mark.stdio
async def test_one_gib_through_exec_and_a_job_keeps_memory_bounded() -> None:
    one_gib = 1024 ** 3
    command = f"yes abcdefghijklmnopqrstuvwxyz0123456789 | head -c {one_gib}"
    async with Client(stdio_transport()) as c:
        peak = PeakRss(_server_pid())
        watcher = asyncio.ensure_future(peak.run())
        try:
            result = await call(c, "terminal_exec", command=command, timeout_sec=300,
                                max_output_kb=64)
            assert result["stdout_bytes"] == one_gib and result["output_dropped_bytes"] > 0
            job = await call(c, "terminal_job_start", command=command)
            page = await call(c, "terminal_job_logs", job_id=job["job_id"],
                              wait_until_exit=True, wait_timeout_sec=45, tail=True,
                              max_bytes=1024)
            while page["status"] == "running":
                page = await call(c, "terminal_job_logs", job_id=job["job_id"],
                                  wait_until_exit=True, wait_timeout_sec=45, tail=True,
                                  max_bytes=1024)
            assert page["total_bytes"] == one_gib and page["data"].endswith("789\n" [:0])
        finally:
            peak._stop = True
            await watcher
    assert peak.peak < RSS_CEILING, f"server peak RSS {peak.peak / 2**20:.0f} MiB"


@pytest.mark.stdio
async def test_hundred_mib_through_a_polling_reader_stays_under_150_mib() -> None:
    mib = 1024 * 1024
    async with Client(stdio_transport()) as c:
        peak = PeakRss(_server_pid())
        watcher = asyncio.ensure_future(peak.run())
        try:
            job = await call(c, "terminal_job_start",
                             command=f"yes 0123456789abcdef | head -c {100 * mib}")
            offset = 0
            while True:
                page = await call(c, "terminal_job_logs", job_id=job["job_id"],
                                  since_offset=offset, max_bytes=mib, wait_for=".",
                                  wait_timeout_sec=10)
                assert page["truncated_bytes_dropped"] == 0
                offset = page["next_offset"]
                if page["eof"]:
                    break
            assert offset == 100 * mib
        finally:
            peak._stop = True
            await watcher
    assert peak.peak < 150 * mib, f"server peak RSS {peak.peak / mib:.0f} MiB"


# -- load --------------------------------------------------------------------------------


async def _caller(client: Client, calls: int, tag: str) -> int:
    ok = 0
    for index in range(calls):
        result = await call(client, "terminal_exec", command=f"echo {tag}-{index}")
        ok += result["stdout"] == f"{tag}-{index}\n"
    return ok


@pytest.mark.stdio
async def test_load_over_stdio() -> None:
    # 20 concurrent callers (5 on each of 4 stdio servers), 200 calls in all.
    async def server(number: int) -> int:
        async with Client(stdio_transport(), mode="legacy") as c:
            counts = await asyncio.gather(*(_caller(c, 10, f"s{number}c{k}")
                                            for k in range(5)))
            return sum(counts)

    totals = await asyncio.gather(*(server(n) for n in range(4)))
    assert sum(totals) == 200


@pytest.mark.stdio
async def test_load_over_http() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, TERMINAL_TOOLS_TOKEN="load-token-0123456789")
    proc = subprocess.Popen([sys.executable, "-m", "terminal_tools", "--transport", "http",
                             "--port", str(port)], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                await asyncio.sleep(0.1)
        url = f"http://127.0.0.1:{port}/mcp"

        async def client(number: int) -> int:
            async with Client(url, auth="load-token-0123456789") as c:
                return await _caller(c, 10, f"h{number}")

        totals = await asyncio.gather(*(client(n) for n in range(20)))
        assert sum(totals) == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# -- bad input -----------------------------------------------------------------------------

BAD = [
    ("terminal_exec", {}),
    ("terminal_exec", {"command": 42}),
    ("terminal_exec", {"command": ["ls"]}),
    ("terminal_exec", {"command": ""}),
    ("terminal_exec", {"command": "ls\x00"}),
    ("terminal_exec", {"command": "ls", "cwd": "/tmp/\x00x"}),
    ("terminal_exec", {"command": "ls", "cwd": "/tmp/\udcff-not-utf8"}),
    ("terminal_exec", {"command": "ls", "timeout_sec": -5}),
    ("terminal_exec", {"command": "ls", "timeout_sec": "soon"}),
    ("terminal_exec", {"command": "ls", "max_output_kb": -1}),
    ("terminal_exec", {"command": "ls", "max_output_kb": 2**40}),
    ("terminal_exec", {"command": "ls", "env": {"A": None}}),
    ("terminal_exec", {"command": "ls", "env": {"": "x"}}),
    ("terminal_exec", {"command": "ls", "limits": {"nofile": 0}}),
    ("terminal_exec", {"command": "ls", "shell": "/bin/zsh"}),
    ("terminal_exec", {"command": "ls", "unknown_parameter": 1}),
    ("terminal_output_get", {}),
    ("terminal_output_get", {"output_handle": ""}),
    ("terminal_output_get", {"output_handle": "out_x", "since_offset": -1}),
    ("terminal_output_get", {"output_handle": "out_x", "max_kb": 0}),
    ("terminal_output_get", {"output_handle": "out_x", "pattern": "("}),
    ("terminal_job_logs", {"job_id": "job_nope"}),
    ("terminal_job_logs", {"job_id": ""}),
    ("terminal_job_logs", {"job_id": 5}),
    ("terminal_job_logs", {"job_id": "job_nope", "stream": "stdin"}),
    ("terminal_job_manage", {"action": "detonate", "job_id": "x"}),
    ("terminal_job_manage", {"action": "signal_term"}),
    ("terminal_job_manage", {"action": "stdin", "job_id": "job_nope", "data": "x"}),
    ("terminal_job_start", {"command": ""}),
    ("terminal_job_start", {"command": "ls", "cwd": "/nonexistent"}),
    ("terminal_job_start", {"command": "ls", "timeout_sec": -1}),
    ("terminal_job_start", {"command": "ls", "name": "x" * 1000}),
    ("terminal_rg", {"pattern": ""}),
    ("terminal_rg", {"pattern": "(", "path": "."}),
    ("terminal_rg", {"pattern": "x", "path": "/nonexistent"}),
    ("terminal_rg", {"pattern": "x", "path": "a\x00b"}),
    ("terminal_rg", {"pattern": "x", "context": -1}),
    ("terminal_rg", {"pattern": "x", "max_results": 0}),
    ("terminal_rg", {"pattern": "x", "type_filter": "nonsense-type"}),
    ("terminal_glob", {"pattern": ""}),
    ("terminal_glob", {"pattern": "*", "path": "/nonexistent"}),
    ("terminal_glob", {"pattern": "*", "sort": "size"}),
    ("terminal_pty_open", {"cols": 3}),
    ("terminal_pty_open", {"cwd": "/nonexistent"}),
    ("terminal_pty_open", {"shell": "zsh"}),
    ("terminal_pty_run", {"session_id": "pty_nope", "command": "ls"}),
    ("terminal_pty_run", {"session_id": "pty_nope", "read_only": "yes please"}),
    ("terminal_pty_close", {"session_id": "pty_nope"}),
    ("terminal_pty_close", {}),
]


async def test_every_bad_input_gets_a_clear_answer_and_the_server_keeps_serving(
        client: Client, legacy_client: Client) -> None:
    # The list above is the matrix: each call must fail cleanly (a tool error, or an
    # error envelope for terminal_exec) and never with a traceback.
    for c in (client, legacy_client):
        for tool, arguments in BAD:
            result = await c.call_tool(tool, arguments, raise_on_error=False)
            text = result.content[0].text if result.content else ""
            if not result.is_error:
                data = result.structured_content or {}
                assert data.get("error") or data.get("expired") or data.get("blocked"), (
                    tool, arguments, data)
                text = data.get("error") or data.get("message") or ""
            assert text and "Traceback" not in text, (tool, arguments, text)
            assert len(text) < 4000
        health = await call(c, "terminal_exec", command="echo alive")
        assert health["stdout"] == "alive\n"


async def test_non_utf8_bytes_in_output_and_file_names(client: Client,
                                                       tmp_path: Path) -> None:
    name = os.fsdecode(b"caf\xe9.txt")
    (tmp_path / name).write_bytes(b"needle \xff\xfe here\n")
    result = await call(client, "terminal_exec", command=f"cat {tmp_path}/caf*.txt")
    assert "needle" in result["stdout"] and "\ufffd" in result["stdout"]
    found = await call(client, "terminal_rg", pattern="needle", path=str(tmp_path))
    assert len(found["matches"]) == 1
    listed = await call(client, "terminal_glob", pattern="caf*", path=str(tmp_path))
    assert len(listed["paths"]) == 1

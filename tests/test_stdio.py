"""The server as a real subprocess over stdio: framing, clean exit, no orphans."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastmcp import Client

from .conftest import call, new_mark, stdio_transport, wait_until_gone

pytestmark = [pytest.mark.anyio, pytest.mark.stdio]

REPO = Path(__file__).resolve().parent.parent


async def test_initialize_list_and_call_over_stdio() -> None:
    async with Client(stdio_transport()) as c:
        names = {t.name for t in await c.list_tools()}
        assert "terminal_exec" in names
        result = await call(c, "terminal_exec", command="echo over-stdio")
        assert result["stdout"] == "over-stdio\n"


async def test_legacy_handshake_over_stdio() -> None:
    async with Client(stdio_transport("--tools", "basic"), mode="legacy") as c:
        names = {t.name for t in await c.list_tools()}
        assert "terminal_job_start" not in names
        assert (await call(c, "terminal_exec", command="true"))["exit_code"] == 0


def _start_raw_server(*args: str, prelude: str = "") -> subprocess.Popen[bytes]:
    """The server as a client starts it; ``prelude`` is Python run before its main()."""
    env = {k: v for k, v in os.environ.items() if k in ("HOME", "PATH", "LANG")}
    command = ["-m", "terminal_tools", *args]
    if prelude:
        command = ["-c", f"{prelude}\nfrom terminal_tools.cli import main\nmain({list(args)!r})"]
    return subprocess.Popen(
        [sys.executable, *command],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        cwd=REPO, start_new_session=True,
    )


def _rpc(proc: subprocess.Popen[bytes], message: dict) -> dict | None:
    assert proc.stdin and proc.stdout
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()
    if "id" not in message:
        return None
    line = proc.stdout.readline()
    return json.loads(line)


def _handshake(proc: subprocess.Popen[bytes]) -> None:
    reply = _rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "1"}}})
    assert reply and reply["result"]["serverInfo"]["name"] == "terminal-tools"
    _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})


def _start_jobs(proc: subprocess.Popen[bytes], mark: str, count: int) -> None:
    for index in range(count):
        reply = _rpc(proc, {"jsonrpc": "2.0", "id": 100 + index, "method": "tools/call",
                            "params": {"name": "terminal_job_start", "arguments": {
                                "command": "bash -c 'sleep 300 & setsid sleep 300 & "
                                           "sleep 300; wait'",
                                "env": {"TT_TEST_MARK": mark}}}})
        assert reply and not reply["result"].get("isError"), reply


def test_stdout_carries_only_json_rpc() -> None:
    proc = _start_raw_server()
    try:
        _handshake(proc)
        reply = _rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "terminal_exec", "arguments": {"command": "echo hello; echo oops >&2"}}})
        assert reply and reply["result"]["structuredContent"]["stdout"] == "hello\n"
        assert proc.stdin
        proc.stdin.close()
        proc.wait(timeout=15)
        assert proc.stdout
        rest = proc.stdout.read()
        for line in rest.splitlines():
            json.loads(line)  # anything else on stdout would break a client
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("how", ["eof", "SIGTERM", "SIGHUP", "SIGINT", "SIGKILL"])
async def test_server_exit_leaves_no_processes(how: str) -> None:
    mark = new_mark()
    proc = _start_raw_server()
    try:
        _handshake(proc)
        _start_jobs(proc, mark, 5 if how == "SIGKILL" else 2)
        reply = _rpc(proc, {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
            "name": "terminal_exec", "arguments": {
                "command": "bash -c 'sleep 300 & sleep 300'", "auto_background_after_sec": 0.5,
                "env": {"TT_TEST_MARK": mark}}}})
        assert reply and reply["result"]["structuredContent"]["auto_backgrounded"] is True
        started = time.monotonic()
        if how == "eof":
            assert proc.stdin
            proc.stdin.close()
        else:
            proc.send_signal(getattr(signal, how))
        proc.wait(timeout=20)
        survivors = await wait_until_gone(mark, timeout=10)
        assert not survivors, f"{how}: {len(survivors)} processes survived"
        assert time.monotonic() - started < 20
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=5)


async def test_server_exits_on_sigterm_even_if_its_cleanup_hangs() -> None:
    # Cleanup that never returns: the alarm set by the signal handler still ends the
    # server, and the watchdog then ends its children.
    mark = new_mark()
    proc = _start_raw_server(prelude=(
        "import time, terminal_tools.server as s\n"
        "s.kill_everything_now = lambda: time.sleep(3600)"
    ))
    try:
        _handshake(proc)
        _start_jobs(proc, mark, 2)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        assert code == -signal.SIGALRM
        assert 4 < time.monotonic() - started < 30
        survivors = await wait_until_gone(mark, timeout=10)
        assert not survivors, f"{len(survivors)} processes survived"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=5)


async def test_restarted_server_reaps_processes_of_a_crashed_predecessor() -> None:
    # A predecessor whose watchdog also died (the worst case): its marked children remain
    # until the next server starts and reaps them.
    mark = new_mark()
    proc = _start_raw_server()
    try:
        _handshake(proc)
        _start_jobs(proc, mark, 1)
        for child in __import__("psutil").Process(proc.pid).children(recursive=True):
            if "watchdog.py" in " ".join(child.cmdline()):
                child.kill()
        time.sleep(0.3)
        proc.kill()
        proc.wait(timeout=5)
        time.sleep(0.5)
        assert (await wait_until_gone(mark, timeout=0.5)), "expected orphans to exist"
        async with Client(stdio_transport()) as c:
            await c.list_tools()
            assert not await wait_until_gone(mark, timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=5)


def test_version_and_bad_options() -> None:
    done = subprocess.run([sys.executable, "-m", "terminal_tools", "--version"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("terminal-tools ")
    done = subprocess.run([sys.executable, "-m", "terminal_tools", "--workdir", "/nonexistent/x"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "not a directory" in done.stderr
    env = dict(os.environ, TERMINAL_TOOLS_MAX_JOBS="lots")
    done = subprocess.run([sys.executable, "-m", "terminal_tools"], capture_output=True,
                          text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "TERMINAL_TOOLS_MAX_JOBS" in done.stderr

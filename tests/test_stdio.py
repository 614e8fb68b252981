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

from .conftest import call, marked_alive, new_mark, stdio_transport, wait_until_gone

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


def _start_raw_server(
    *args: str, prelude: str = "", env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """The server as a client starts it; ``prelude`` is Python run before its main()."""
    env = {k: v for k, v in os.environ.items() if k in ("HOME", "PATH", "LANG")} | (env or {})
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
    while True:
        # The server may send notifications (an ended job's log message) between
        # replies, as MCP allows: a client skips what is not its reply.
        reply = json.loads(proc.stdout.readline())
        if reply.get("id") == message["id"]:
            return reply


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


async def test_restarted_server_reaps_processes_of_a_crashed_predecessor(tmp_path: Path) -> None:
    # A predecessor whose watchdog also died (the worst case): its marked children remain
    # until the next server starts and reaps them. Both use a private state folder, so no
    # other server starting on the machine meanwhile can reap them first. The server is
    # stopped first, or it would start a new watchdog when the first one dies.
    mark = new_mark()
    private = {"TERMINAL_TOOLS_STATE_DIR": str(tmp_path / "state")}
    proc = _start_raw_server(env=private)
    try:
        _handshake(proc)
        _start_jobs(proc, mark, 1)
        proc.send_signal(signal.SIGSTOP)
        for child in __import__("psutil").Process(proc.pid).children(recursive=True):
            if "watchdog.py" in " ".join(child.cmdline()):
                child.kill()
        time.sleep(0.3)
        proc.kill()
        proc.wait(timeout=5)
        time.sleep(0.5)
        assert (await wait_until_gone(mark, timeout=0.5)), "expected orphans to exist"
        assert len(os.listdir(tmp_path / "state")) == 1  # the dead instance, registered
        async with Client(stdio_transport(env=private)) as c:
            await c.list_tools()
            assert not await wait_until_gone(mark, timeout=10)
            info = json.loads((await c.read_resource("terminal://server-info"))[0].text)
            # Only the successor is registered now: the dead one was forgotten.
            assert os.listdir(tmp_path / "state") == [info["instance"]]
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=5)


def _decoy(instance: str, mark: str, *launcher: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, TT_TEST_MARK=mark, TERMINAL_TOOLS_OWNER=f"{instance}:1")
    return subprocess.Popen([*launcher, "sleep", "300"], env=env, start_new_session=True)


async def test_reaping_is_limited_to_what_a_dead_instance_provably_owned(
    tmp_path: Path,
) -> None:
    # Processes carrying the mark of a dead server are ended by a starting server only
    # when that server was registered in the same folder, the process runs as the same
    # user, and it was created after that server started.
    import shutil

    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    now_ms = int(time.time() * 1000)
    registered = f"999999.{now_ms - 60_000}.aaaaaaaa"  # a pid that no longer runs
    later = f"999998.{now_ms + 3_600_000}.bbbbbbbb"  # "started" after the decoy below
    for instance in (registered, later):
        (state / instance).touch()
    unregistered = f"999997.{now_ms - 60_000}.cccccccc"
    marks = {name: new_mark() for name in ("owned", "unregistered", "older", "other_user")}
    decoys = [
        _decoy(registered, marks["owned"]),
        _decoy(unregistered, marks["unregistered"]),
        _decoy(later, marks["older"]),
    ]
    nobody = shutil.which("setpriv") and os.getuid() == 0
    if nobody:
        decoys.append(_decoy(registered, marks["other_user"], "setpriv", "--reuid=65534",
                             "--regid=65534", "--clear-groups", "--"))
    try:
        time.sleep(0.3)
        async with Client(stdio_transport(env={"TERMINAL_TOOLS_STATE_DIR": str(state)})) as c:
            await c.list_tools()
            assert not await wait_until_gone(marks["owned"], timeout=10)
            assert marked_alive(marks["unregistered"]), "reaped a server it never knew"
            assert marked_alive(marks["older"]), "reaped a process older than its server"
            if nobody:
                assert marked_alive(marks["other_user"]), "reaped another user's process"
    finally:
        for decoy in decoys:
            decoy.kill()
            decoy.wait(timeout=5)


_INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "pipe", "version": "1"}}}
_READY = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _pipe_in(*calls: dict, env: dict[str, str] | None = None) -> tuple[list[dict], float]:
    """Write the handshake and ``calls`` to a fresh server's stdin, close it at once
    (``printf ... | terminal-tools``), and return every reply and the time to exit."""
    lines = [_INIT, _READY, *calls]
    payload = "".join(json.dumps(line) + "\n" for line in lines).encode()
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "terminal_tools"], input=payload,
                          capture_output=True, timeout=120, cwd=REPO,
                          env={k: v for k, v in os.environ.items()} | (env or {}))
    elapsed = time.monotonic() - started
    return [json.loads(line) for line in done.stdout.splitlines()], elapsed


def _exec_call(request_id: int, command: str) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": "terminal_exec", "arguments": {"command": command}}}


def test_requests_read_before_stdin_closed_are_answered() -> None:
    replies, _ = _pipe_in(_exec_call(2, "sleep 1; echo first"), _exec_call(3, "echo second"))
    by_id = {reply["id"]: reply for reply in replies}
    assert set(by_id) == {1, 2, 3}
    assert by_id[2]["result"]["structuredContent"]["stdout"] == "first\n"
    assert by_id[3]["result"]["structuredContent"]["stdout"] == "second\n"


async def test_after_stdin_closes_a_long_call_gets_only_the_shutdown_grace() -> None:
    mark = new_mark()
    call = _exec_call(2, "sleep 120")
    call["params"]["arguments"]["env"] = {"TT_TEST_MARK": mark}
    replies, elapsed = _pipe_in(call, env={"TERMINAL_TOOLS_SHUTDOWN_GRACE_SEC": "1"})
    assert elapsed < 30
    assert [reply["id"] for reply in replies] == [1, 2]
    assert "error" in replies[1]  # cut short by the grace, and said so
    assert not await wait_until_gone(mark, timeout=10)


def test_version_and_bad_options() -> None:
    for flag in ("--version", "-V"):
        done = subprocess.run([sys.executable, "-m", "terminal_tools", flag],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout.startswith("terminal-tools "), flag
    done = subprocess.run([sys.executable, "-m", "terminal_tools", "--workdir", "/nonexistent/x"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "not a directory" in done.stderr
    env = dict(os.environ, TERMINAL_TOOLS_MAX_JOBS="lots")
    done = subprocess.run([sys.executable, "-m", "terminal_tools"], capture_output=True,
                          text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "TERMINAL_TOOLS_MAX_JOBS" in done.stderr

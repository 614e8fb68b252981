"""HTTP clients are kept apart: a job, PTY session or output handle belongs to the MCP
session that created it (one user's several clients may share with
``share_across_sessions``), and each named token (principal) sees only its own."""

from __future__ import annotations

import json
import os
import stat
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastmcp import Client

from .conftest import call, call_error, http_server_process

pytestmark = [pytest.mark.anyio, pytest.mark.stdio]

ALICE = "alice-token-0123456789"
BOB = "bob-token-9876543210xx"


def _tokens_file(tmp_path: Path) -> str:
    path = tmp_path / "tokens"
    path.write_text(f"# principal token\nalice {ALICE}\nbob   {BOB}\n")
    path.chmod(0o600)
    return str(path)


@pytest.fixture(scope="module")
def isolated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tokens = _tokens_file(tmp_path_factory.mktemp("tokens"))
    with http_server_process(env={"TERMINAL_TOOLS_TOKENS_FILE": tokens}) as (url, _):
        yield url


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tokens = _tokens_file(tmp_path_factory.mktemp("tokens"))
    env = {"TERMINAL_TOOLS_TOKENS_FILE": tokens, "TERMINAL_TOOLS_SHARE_ACROSS_SESSIONS": "1"}
    with http_server_process(env=env) as (url, _):
        yield url


async def _owned(c: Client) -> dict[str, str]:
    """A running job, an open PTY session and an output handle, created by ``c``."""
    job = await call(c, "terminal_job_start", command="sleep 60", name="mine")
    pty = await call(c, "terminal_pty_open")
    out = await call(c, "terminal_exec", command="seq 1 20000", max_output_kb=1)
    assert out["output_handle"]
    return {"job": job["job_id"], "pty": pty["session_id"], "handle": out["output_handle"]}


async def _sees(c: Client, owned: dict[str, str]) -> dict[str, bool]:
    listed = await call(c, "terminal_job_manage", action="list")
    by_list = owned["job"] in {j["job_id"] for j in listed["jobs"]}
    logs = await c.call_tool("terminal_job_logs", {"job_id": owned["job"]}, raise_on_error=False)
    by_name = await c.call_tool("terminal_job_logs", {"job_id": "mine"}, raise_on_error=False)
    pty = await c.call_tool("terminal_pty_run", {"session_id": owned["pty"], "read_only": True},
                            raise_on_error=False)
    page = await call(c, "terminal_output_get", output_handle=owned["handle"])
    return {"list": by_list, "logs": not logs.is_error, "name": not by_name.is_error,
            "pty": not pty.is_error, "handle": not page["expired"]}


ALL = {"list": True, "logs": True, "name": True, "pty": True, "handle": True}
NONE = {"list": False, "logs": False, "name": False, "pty": False, "handle": False}


async def test_each_session_sees_only_what_it_created(isolated: str) -> None:
    async with Client(isolated, auth=ALICE, mode="legacy") as a1, \
            Client(isolated, auth=ALICE, mode="legacy") as a2:
        owned = await _owned(a1)
        assert await _sees(a1, owned) == ALL
        # The same principal's other session, and another principal: nothing.
        assert await _sees(a2, owned) == NONE
        async with Client(isolated, auth=BOB, mode="legacy") as b:
            assert await _sees(b, owned) == NONE
            # Nor can they end it: to them the id is unknown, and it names no one else's.
            text = await call_error(b, "terminal_job_manage", action="signal_kill",
                                    job_id=owned["job"])
            assert "unknown job" in text and "Known jobs: none" in text
            text = await call_error(b, "terminal_pty_close", session_id=owned["pty"])
            assert "unknown or already closed" in text
        assert (await call(a1, "terminal_job_logs", job_id=owned["job"]))["status"] == "running"
        await call(a1, "terminal_job_manage", action="signal_kill", job_id=owned["job"])
        await call(a1, "terminal_pty_close", session_id=owned["pty"])


async def test_sessions_of_one_principal_share_when_configured(shared: str) -> None:
    async with Client(shared, auth=ALICE, mode="legacy") as a1, \
            Client(shared, auth=ALICE, mode="legacy") as a2, \
            Client(shared, auth=BOB, mode="legacy") as b:
        owned = await _owned(a1)
        assert await _sees(a2, owned) == ALL
        assert await _sees(b, owned) == NONE
        await call(a2, "terminal_job_manage", action="signal_kill", job_id=owned["job"])
        await call(a2, "terminal_pty_close", session_id=owned["pty"])


async def test_a_stateless_client_is_scoped_by_its_token(isolated: str) -> None:
    # The newest protocol has no session: every request stands alone, so what a client
    # creates belongs to its principal.
    async with Client(isolated, auth=BOB) as b, Client(isolated, auth=ALICE) as a:
        job = await call(b, "terminal_job_start", command="sleep 60")
        listed = await call(b, "terminal_job_manage", action="list")
        assert job["job_id"] in {j["job_id"] for j in listed["jobs"]}
        listed = await call(a, "terminal_job_manage", action="list")
        assert job["job_id"] not in {j["job_id"] for j in listed["jobs"]}
        await call(b, "terminal_job_manage", action="signal_kill", job_id=job["job_id"])


def _initialize(url: str, token: str | None) -> tuple[int, str]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers,
                                     method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as error:
        return int(error.code), error.read().decode()


@pytest.mark.parametrize("token", [None, "wrong-token", ""])
def test_401_says_a_bearer_token_is_required_and_where_it_comes_from(
    isolated: str, token: str | None
) -> None:
    status, body = _initialize(isolated, token)
    assert status == 401
    description = json.loads(body)["error_description"]
    assert "requires a bearer token" in description
    assert "Authorization: Bearer" in description
    assert "TERMINAL_TOOLS_TOKEN" in description and "printed it" in description
    assert "re-register" not in description
    assert ("wrong" in description) == bool(token)


def test_named_tokens_each_work(isolated: str) -> None:
    assert _initialize(isolated, ALICE)[0] == 200
    assert _initialize(isolated, BOB)[0] == 200


@pytest.mark.parametrize(("content", "mode", "problem"), [
    ("alice short\n", 0o600, "shorter than 16"),
    (f"alice {ALICE}\nalice {BOB}\n", 0o600, "listed twice"),
    (f"alice {ALICE} extra\n", 0o600, "expected 'NAME TOKEN'"),
    (f"alice {ALICE}\n", 0o644, "readable by other users"),
    ("# nothing\n", 0o600, "lists no tokens"),
])
def test_a_bad_tokens_file_stops_the_server(
    tmp_path: Path, content: str, mode: int, problem: str
) -> None:
    import subprocess
    import sys

    path = tmp_path / "tokens"
    path.write_text(content)
    path.chmod(mode)
    assert stat.S_IMODE(os.stat(path).st_mode) == mode
    done = subprocess.run(
        [sys.executable, "-m", "terminal_tools", "--transport", "http", "--port", "1"],
        env={**os.environ, "TERMINAL_TOOLS_TOKENS_FILE": str(path)},
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert problem in done.stderr

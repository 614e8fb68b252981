"""Streamable HTTP: loopback only by default, bearer token required, rebinding refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from fastmcp import Client

from .conftest import call, call_error, http_server_process

pytestmark = [pytest.mark.anyio, pytest.mark.stdio]

TOKEN = "test-token-1234567"


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    with http_server_process(env={"TERMINAL_TOOLS_TOKEN": TOKEN}) as (url, _):
        yield url


def _post(url: str, token: str | None, **headers: str) -> int:
    """POST an initialize request; returns the HTTP status."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}
    all_headers = {"Accept": "application/json, text/event-stream",
                   "Content-Type": "application/json", **headers}
    if token is not None:
        all_headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=all_headers,
                                     method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_no_token_is_rejected(http_server: str) -> None:
    assert _post(http_server, None) == 401


def test_wrong_token_is_rejected(http_server: str) -> None:
    assert _post(http_server, "nope") == 401


def test_foreign_origin_is_rejected(http_server: str) -> None:
    assert _post(http_server, TOKEN, Origin="http://evil.example") == 403


async def test_right_token_can_use_the_tools(http_server: str) -> None:
    async with Client(http_server, auth=TOKEN) as c:
        result = await call(c, "terminal_exec", command="echo over-http")
        assert result["stdout"] == "over-http\n"


def test_non_loopback_bind_without_token_is_refused() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TERMINAL_TOOLS_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "terminal_tools", "--transport", "http", "--host", "0.0.0.0"],
        env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "without a token" in done.stderr


def test_a_token_too_short_to_be_safe_is_refused_at_startup() -> None:
    env = dict(os.environ, TERMINAL_TOOLS_TOKEN="short")
    done = subprocess.run(
        [sys.executable, "-m", "terminal_tools", "--transport", "http", "--port", "1"],
        env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "shorter than 16 characters" in done.stderr and done.stdout == ""


async def test_each_http_session_hears_only_of_its_own_jobs(http_server: str) -> None:
    import anyio

    async with Client(http_server, auth=TOKEN, mode="legacy") as mine, \
            Client(http_server, auth=TOKEN, mode="legacy") as other:
        started = await call(mine, "terminal_job_start", command="true")
        await anyio.sleep(0.5)
        # Another session's results never carry it, whatever it calls.
        assert (await call(other, "terminal_job_manage", action="list"))["ended_jobs"] == []
        assert (await call(other, "terminal_glob", pattern="*.none"))["ended_jobs"] == []
        await call_error(other, "terminal_job_logs", job_id=started["job_id"])
        (notice,) = (await call(mine, "terminal_glob", pattern="*.none"))["ended_jobs"]
        assert notice["job_id"] == started["job_id"] and notice["exit_code"] == 0
        assert (await call(mine, "terminal_glob", pattern="*.none"))["ended_jobs"] == []


async def test_job_subscriptions_over_http_are_per_session(http_server: str) -> None:
    import warnings

    import anyio
    import mcp_types

    from .test_job_events import Recorder, updated_for

    recorder = Recorder()
    async with Client(http_server, auth=TOKEN, mode="legacy", message_handler=recorder) as mine, \
            Client(http_server, auth=TOKEN, mode="legacy") as other:
        started = await call(mine, "terminal_job_start", command="bash -c 'sleep 1.5'")
        uri = f"terminal://jobs/{started['job_id']}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await mine.session.subscribe_resource(uri)
            # Another session cannot even name the job.
            with pytest.raises(Exception, match="unknown job"):
                await other.session.subscribe_resource(uri)
        await recorder.wait_for(mcp_types.ResourceUpdatedNotification, updated_for(uri))
        with anyio.fail_after(5):
            await recorder.wait_for(mcp_types.LoggingMessageNotification)

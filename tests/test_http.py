"""Streamable HTTP: loopback only by default, bearer token required, rebinding refused."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from fastmcp import Client

from .conftest import call

pytestmark = [pytest.mark.anyio, pytest.mark.stdio]

TOKEN = "test-token-123"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    port = _free_port()
    env = dict(os.environ, TERMINAL_TOOLS_TOKEN=TOKEN)
    proc = subprocess.Popen(
        [sys.executable, "-m", "terminal_tools", "--transport", "http", "--port", str(port)],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            time.sleep(0.1)
    try:
        yield url
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


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

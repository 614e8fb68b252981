"""Shared fixtures: an in-memory MCP client per test, and helpers to call tools."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psutil
import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from terminal_tools.config import Settings
from terminal_tools.server import build_server

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with Client(build_server(Settings())) as c:
        yield c


@pytest.fixture
async def legacy_client() -> AsyncIterator[Client]:
    async with Client(build_server(Settings()), mode="legacy") as c:
        yield c


def make_client(**settings: Any) -> Client:
    return Client(build_server(Settings(**settings)))


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; return its structured content."""
    result = await client.call_tool(tool, arguments, raise_on_error=False)
    assert not result.is_error, result.content[0].text if result.content else result
    assert result.structured_content is not None
    return result.structured_content


async def call_error(client: Client, tool: str, **arguments: Any) -> str:
    """Call a tool that must fail; return the error text the agent sees."""
    result = await client.call_tool(tool, arguments, raise_on_error=False)
    assert result.is_error, f"expected an error, got {result.structured_content}"
    return result.content[0].text


def new_mark() -> str:
    """A unique value tests put in a child's environment to find its processes later."""
    return "tt-test-" + uuid.uuid4().hex[:12]


def marked_alive(mark: str) -> list[psutil.Process]:
    """Live (non-zombie) processes whose environment carries ``TT_TEST_MARK=mark``."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("TT_TEST_MARK") == mark and \
                    proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


async def wait_until_gone(mark: str, timeout: float = 10.0) -> list[psutil.Process]:
    import anyio

    with anyio.move_on_after(timeout):
        while marked_alive(mark):
            await anyio.sleep(0.1)
    return marked_alive(mark)


def stdio_transport(
    *args: str, env: dict[str, str] | None = None, launcher: list[str] | None = None
) -> StdioTransport:
    """The server as a real subprocess, started the way a client starts it (through
    ``launcher``, such as ``["setpriv", ...]``, when given)."""
    full_env = {k: v for k, v in os.environ.items() if k in ("HOME", "PATH", "LANG", "USER")}
    full_env.update(env or {})
    command = [*(launcher or []), sys.executable, "-m", "terminal_tools", *args]
    return StdioTransport(command[0], command[1:], env=full_env, keep_alive=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def http_server_process(
    *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """The server over streamable HTTP on a free loopback port: yields its ``/mcp`` URL and
    the process (stderr is captured; read it after the block)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "terminal_tools", "--transport", "http", "--port", str(port),
         *args],
        env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate(timeout=10)

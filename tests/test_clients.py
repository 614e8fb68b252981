"""The server driven by a client nobody here wrote: the official MCP TypeScript SDK.

``tests/sdk_client.mjs`` connects over stdio and over HTTP, offers a root, calls every
listed tool and validates each result against the tool's output schema (the SDK does too).
Needs ``node`` and the SDK installed with ``npm ci --prefix tests``; skipped otherwise.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import http_server_process

TOKEN = "sdk-client-token"

pytestmark = [pytest.mark.stdio]

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SCRIPT = HERE / "sdk_client.mjs"


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the TypeScript SDK client tests need Node 18+")
    if not (HERE / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.skip("the TypeScript SDK is not installed: run `npm ci --prefix tests`")
    return node


def _drive(*args: str, cwd: Path) -> dict[str, Any]:
    done = subprocess.run(
        [_node(), str(SCRIPT), *args, str(REPO)],
        capture_output=True, text=True, timeout=180, cwd=cwd, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _check(report: dict[str, Any]) -> None:
    assert report["failures"] == []
    assert report["server"]["name"] == "terminal-tools"
    # Every tool listed was called at least once with a result that matched its schema.
    assert report["unvalidated_tools"] == []
    assert "terminal_exec" in report["tools"] and len(report["tools"]) >= 6
    # The tools ran in the client's first root, and server-info says so.
    assert report["exec_cwd"] == str(REPO)
    assert report["server_info"]["default_workdir"] == str(REPO)
    assert report["job_stdout"] == "hello\n"
    assert report["after_errors"] == "still-serving\n"
    assert report["skill_resources"] >= 5


def test_typescript_sdk_over_stdio(tmp_path: Path) -> None:
    report = _drive("stdio", sys.executable, cwd=tmp_path)
    _check(report)
    # At the default log level, nothing a client does routinely reaches stderr: no
    # deprecation warning for offering roots, no log for a refused call.
    assert report["stderr"] == ""


def test_typescript_sdk_over_http(tmp_path: Path) -> None:
    _node()
    with http_server_process(env={"TERMINAL_TOOLS_TOKEN": TOKEN}) as (url, _):
        report = _drive("http", url, TOKEN, cwd=tmp_path)
    _check(report)
    # The SDK's error for a missing or wrong token carries the server's explanation.
    for label in ("missing", "wrong"):
        message = report["refusals"][label]
        assert "requires a bearer token" in message, message
        assert "TERMINAL_TOOLS_TOKEN" in message


def test_sdk_lock_file_pins_the_sdk() -> None:
    lock = json.loads((HERE / "package-lock.json").read_text())
    pinned = lock["packages"]["node_modules/@modelcontextprotocol/sdk"]["version"]
    wanted = json.loads((HERE / "package.json").read_text())["dependencies"]
    assert wanted["@modelcontextprotocol/sdk"] == pinned

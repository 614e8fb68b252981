"""What a newcomer meets first: server-info that tells the truth, errors in the agent's
own terms, and a quiet stderr at the default log level."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastmcp import Client

from terminal_tools.config import Settings
from terminal_tools.server import build_server

from .conftest import call, call_error, stdio_transport

pytestmark = pytest.mark.anyio


async def _server_info(c: Client) -> dict:
    return json.loads((await c.read_resource("terminal://server-info"))[0].text)


async def test_server_info_reports_the_workdir_the_tools_use(tmp_path: Path) -> None:
    async with Client(build_server(Settings()), roots=[tmp_path.as_uri()], mode="legacy") as c:
        info = await _server_info(c)
        ran = await call(c, "terminal_exec", command="pwd")
        assert info["default_workdir"] == ran["cwd"] == str(tmp_path)
    # Without a root it is the server's own cwd, and --workdir wins over a root.
    async with Client(build_server(Settings()), mode="legacy") as c:
        info = await _server_info(c)
        assert info["default_workdir"] == (await call(c, "terminal_exec", command="pwd"))["cwd"]
    other = tmp_path / "other"
    other.mkdir()
    server = build_server(Settings(workdir=str(other)))
    async with Client(server, roots=[tmp_path.as_uri()], mode="legacy") as c:
        assert (await _server_info(c))["default_workdir"] == str(other)


@pytest.mark.parametrize(("arguments", "expected"), [
    ({"command": 5}, "invalid argument for terminal_exec: command: Input should be a valid "
                     "string (got 5)"),
    ({"command": "true", "limits": {"cpu_sec": -1}},
     "invalid argument for terminal_exec: limits.cpu_sec: Input should be greater than 0 "
     "(got -1)"),
    ({}, "invalid argument for terminal_exec: command: Missing required argument"),
])
async def test_argument_errors_name_the_parameter_without_pydantic_internals(
    client: Client, arguments: dict, expected: str
) -> None:
    text = await call_error(client, "terminal_exec", **arguments)
    assert text == expected
    assert "pydantic" not in text and "[type=" not in text


@pytest.mark.parametrize("engine", ["ripgrep", "python"])
async def test_a_bad_regex_error_shows_the_agents_own_pattern(
    tmp_path: Path, engine: str
) -> None:
    (tmp_path / "a.txt").write_text("x\n")
    async with Client(build_server(Settings(search_engine=engine))) as c:
        info = await _server_info(c)
        if info["search_engine"] != engine:
            pytest.skip(f"{engine} is not available")
        text = await call_error(c, "terminal_rg", pattern="a([", path=str(tmp_path))
        assert "(?:" not in text
        if engine == "ripgrep":
            lines = text.splitlines()
            shown = next(i for i, line in enumerate(lines) if line.strip() == "a([")
            # The caret still points at the unclosed bracket of the agent's pattern.
            assert lines[shown + 1].index("^") == lines[shown].index("[")


async def test_stderr_stays_quiet_at_the_default_log_level(tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"
    transport = stdio_transport()
    transport.log_file = log
    async with Client(transport, roots=[tmp_path.as_uri()], mode="legacy") as c:
        await call(c, "terminal_exec", command="true")  # asks the client for its roots
        await call_error(c, "terminal_job_logs", job_id="nope")  # a refused call
        await call_error(c, "terminal_exec", command=5)  # bad arguments
        await call_error(c, "terminal_rg", pattern="([")
    text = log.read_text()
    assert text == "", text


def test_readme_inspector_line_uses_flags_fastmcp_has() -> None:
    # The README's Inspector command turns auto-reload off (a reload ends every job and
    # PTY session); each flag it passes must exist in the installed FastMCP CLI.
    import re
    import shutil
    import subprocess
    import sys

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    line = next(raw for raw in readme.splitlines() if "fastmcp dev inspector" in raw
                and not raw.startswith("`"))
    assert "--no-reload" in line and "npm_config_yes=true" in line
    fastmcp = shutil.which("fastmcp", path=str(Path(sys.executable).parent))
    if fastmcp is None:
        pytest.skip("the fastmcp command is not installed next to this Python")
    shown = subprocess.run([fastmcp, "dev", "inspector", "--help"], capture_output=True,
                           text=True, timeout=120, env={"COLUMNS": "200", "PATH": ""})
    assert shown.returncode == 0, shown.stderr
    for flag in re.findall(r"(?<=\s)(--?[a-z][a-z-]*)", line.split("inspector", 1)[1]):
        assert flag in shown.stdout, flag

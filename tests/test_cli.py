"""Every command-line option, end to end: the option given to a real server process
changes what that server reports and does, not only what the parser accepts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastmcp import Client

from terminal_tools.cli import _parser
from terminal_tools.config import setting_fields

from .conftest import call, stdio_transport

pytestmark = [pytest.mark.anyio, pytest.mark.stdio]

SECRET = "tt-cli-secret-value-0123456789"


async def _server_info(c: Client) -> dict:
    return json.loads((await c.read_resource("terminal://server-info"))[0].text)


def test_every_option_but_version_is_a_setting() -> None:
    """An option that is not named after a setting would be parsed and then dropped."""
    names = {f.name for f in setting_fields()}
    dests = {a.dest for a in _parser()._actions if a.dest not in ("help", "version")}
    assert dests <= names, f"options with no setting behind them: {dests - names}"


async def test_policy_audit_log_and_workdir_options_reach_the_server(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[[deny]]\ncommand = "rm"\nmessage = "cli policy says no"\n')
    audit = tmp_path / "audit.jsonl"
    workdir = tmp_path / "work"
    workdir.mkdir()
    transport = stdio_transport(
        "--policy", str(policy), "--audit-log", str(audit), "--workdir", str(workdir),
        "--tools", "basic", "--log-level", "ERROR",
    )
    async with Client(transport) as c:
        info = await _server_info(c)
        assert info["policy"]["source"] == str(policy)
        assert info["audit_log"] == str(audit)
        assert info["categories"] == ["basic"]
        assert info["settings"]["log_level"] == "ERROR"
        refused = await call(c, "terminal_exec", command="rm -f nothing-here")
        assert refused["blocked"] is True and "cli policy says no" in refused["error"]
        ran = await call(c, "terminal_exec", command="pwd")
        assert ran["stdout"].strip() == str(workdir)
        assert "terminal_job_start" not in {t.name for t in await c.list_tools()}
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert any("rm -f nothing-here" in json.dumps(r) for r in records), records


@pytest.mark.parametrize("flag,masked", [("--redact-secrets", True),
                                         ("--no-redact-secrets", False)])
async def test_redact_secrets_option_switches_masking(flag: str, masked: bool) -> None:
    transport = stdio_transport(flag, env={"TT_CLI_TOKEN": SECRET})
    async with Client(transport) as c:
        info = await _server_info(c)
        assert info["settings"]["redact_secrets"] is masked
        result = await call(c, "terminal_exec", command="echo $TT_CLI_TOKEN")
        assert (SECRET in result["stdout"]) is (not masked), result["stdout"]


async def test_command_line_wins_over_the_environment(tmp_path: Path) -> None:
    transport = stdio_transport(
        "--no-redact-secrets",
        env={"TT_CLI_TOKEN": SECRET, "TERMINAL_TOOLS_REDACT_SECRETS": "on"},
    )
    async with Client(transport) as c:
        result = await call(c, "terminal_exec", command="echo $TT_CLI_TOKEN")
        assert SECRET in result["stdout"]


async def test_login_path_option_reads_path_from_the_login_shell(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    (home / ".bash_profile").write_text(f'export PATH="{home}/bin:$PATH"\n')
    transport = stdio_transport("--login-path", env={"HOME": str(home), "SHELL": "/bin/bash"})
    async with Client(transport) as c:
        info = await _server_info(c)
        assert info["path_source"].startswith("login shell"), info["path_source"]
        result = await call(c, "terminal_exec", command="echo $PATH")
        assert f"{home}/bin" in result["stdout"]


@pytest.mark.parametrize("option,value", [
    ("--policy", "no-such-policy.toml"),
    ("--audit-log", "no-such-dir/audit.jsonl"),
    ("--workdir", "no-such-dir"),
    ("--port", "70000"),
    ("--log-level", "bogus"),
])
def test_a_bad_option_value_exits_with_a_one_line_reason(
    tmp_path: Path, option: str, value: str
) -> None:
    bad = value if value.isdigit() or option == "--log-level" else str(tmp_path / value)
    env = {k: v for k, v in os.environ.items() if k in ("HOME", "PATH", "LANG")}
    proc = subprocess.run(
        [sys.executable, "-m", "terminal_tools", option, bad],
        stdin=subprocess.DEVNULL, capture_output=True, timeout=60, env=env,
    )
    assert proc.returncode == 2
    assert proc.stdout == b""
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and bad in lines[0], lines

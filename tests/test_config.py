"""Settings: environment overrides, validation, and the reference docs kept in step."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastmcp import Client

from terminal_tools.config import Settings
from terminal_tools.reference import REFERENCES, configuration_md, tools_md

pytestmark = pytest.mark.anyio


def test_defaults_are_the_documented_ones() -> None:
    s = Settings()
    assert (s.max_jobs, s.max_pty_sessions) == (32, 8)
    assert s.job_window_bytes == 4 * 1024 * 1024
    assert (s.store_max_bytes, s.store_ttl_sec) == (64 * 1024 * 1024, 300)
    assert s.wait_cap_sec == 45
    assert (s.exec_timeout_sec, s.exec_auto_background_sec) == (60, 30)
    assert s.inline_max_kb == 256
    assert s.pty_idle_timeout_sec == 1800


def test_environment_overrides_every_kind_of_setting() -> None:
    s = Settings.from_env({
        "TERMINAL_TOOLS_MAX_JOBS": "3", "TERMINAL_TOOLS_WAIT_CAP_SEC": "1.5",
        "TERMINAL_TOOLS_LOGIN_PATH": "yes", "TERMINAL_TOOLS_TOOLS": "basic",
        "TERMINAL_TOOLS_WORKDIR": "/tmp",
    })
    assert (s.max_jobs, s.wait_cap_sec, s.login_path, s.tools, s.workdir) == (
        3, 1.5, True, "basic", "/tmp")


def test_cli_overrides_win_over_environment() -> None:
    s = Settings.from_env({"TERMINAL_TOOLS_PORT": "9000"}, port=9100, host=None)
    assert s.port == 9100 and s.host == "127.0.0.1"


@pytest.mark.parametrize("name,value", [
    ("TERMINAL_TOOLS_MAX_JOBS", "many"), ("TERMINAL_TOOLS_MAX_JOBS", "0"),
    ("TERMINAL_TOOLS_TOOLS", "everything"), ("TERMINAL_TOOLS_LOGIN_PATH", "maybe"),
    ("TERMINAL_TOOLS_PORT", "70000"),
])
def test_bad_environment_values_are_refused_by_name(name: str, value: str) -> None:
    with pytest.raises(ValueError) as caught:
        Settings.from_env({name: value})
    assert name.removeprefix("TERMINAL_TOOLS_").lower() in str(caught.value).lower()


def test_configuration_reference_matches_the_settings() -> None:
    path = REFERENCES / "configuration.md"
    assert path.read_text() == configuration_md(), (
        "references/configuration.md is stale: run python -m terminal_tools.reference")


async def test_tools_reference_matches_the_live_schemas(client: Client) -> None:
    tools = sorted(await client.list_tools(), key=lambda t: t.name)
    path: Path = REFERENCES / "tools.md"
    assert path.read_text() == tools_md(tools), (
        "references/tools.md is stale: run python -m terminal_tools.reference")


async def test_login_path_takes_path_from_the_login_shell(tmp_path: Path) -> None:
    import json
    import os

    from .conftest import call, make_client

    # A login shell whose profile adds a directory, as Homebrew or nvm setups do.
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    (home / ".bash_profile").write_text(f'export PATH="{home}/bin:$PATH"\n')
    tool = home / "bin" / "only-in-login-path"
    tool.write_text("#!/bin/sh\necho found-it\n")
    tool.chmod(0o755)
    saved = {k: os.environ.get(k) for k in ("HOME", "SHELL")}
    os.environ.update(HOME=str(home), SHELL="/bin/bash")
    try:
        async with make_client(login_path=True) as c:
            info = json.loads((await c.read_resource("terminal://server-info"))[0].text)
            assert info["path_source"].startswith("login shell")
            result = await call(c, "terminal_exec", command="only-in-login-path")
            assert result["stdout"] == "found-it\n"
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

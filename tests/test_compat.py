"""Drop-in for the reference's skills: each call the five reference skills teach, sent
exactly as they write it, gives the fields they tell the agent to read, with the meaning
they describe. Sections follow the skills: job control, filesystem search, PTY sessions,
foundations, troubleshooting."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fastmcp import Client

from .conftest import call, call_error, make_client

pytestmark = pytest.mark.anyio


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A small project shaped like the skills' examples."""
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "core/framework/skills/nested").mkdir(parents=True)
    (root / "core/framework/skills/nested/lk_scan_post_reactors.md").write_text("# scan\n")
    (root / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "1.2.3"\n')
    (root / "setup.cfg").write_text("version = 9\n")
    (root / "src/app.py").write_text(
        "import os\n\n\ndef main():\n    # TODO: wire up\n    return 1\n\n\n"
        "def helper(x):\n    return x\n"
    )
    (root / "src/notes.txt").write_text("TODO outside python\n")
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    (root / "server.log").write_text("error one\n")
    (root / "build").mkdir()
    (root / "build/generated.py").write_text("generated = True\n")
    (root / "build/out.log").write_text("built\n")
    return root


@pytest.fixture
async def agent(project: Path) -> AsyncIterator[Client]:
    """A client whose session workdir is the project (as the skills assume)."""
    async with make_client(workdir=str(project)) as c:
        yield c


# -- job control: terminal-tools-job-control ----------------------------------------------


async def test_start_then_poll_until_status_is_exited(agent: Client) -> None:
    started = await call(agent, "terminal_job_start", command="bash -c 'echo one; sleep 0.3; echo two'")
    assert {"job_id", "pid", "started_at"} <= started.keys()
    job_id = started["job_id"]
    page = await call(agent, "terminal_job_logs", job_id=job_id, since_offset=0, max_bytes=64000)
    assert {"data", "offset", "next_offset", "status", "exit_code"} <= page.keys()
    seen = page["data"]
    deadline = time.monotonic() + 30
    # The skill's loop: repeat with since_offset = next_offset until status == "exited".
    while page["status"] != "exited":
        assert page["status"] == "running" and time.monotonic() < deadline
        await asyncio.sleep(0.05)
        page = await call(agent, "terminal_job_logs", job_id=job_id,
                          since_offset=page["next_offset"], max_bytes=64000)
        seen += page["data"]
    assert seen == "one\ntwo\n" and page["exit_code"] == 0 and page["end_reason"] == "exit"


@pytest.mark.parametrize(("action", "signum"), [("signal_int", signal.SIGINT),
                                                ("signal_term", signal.SIGTERM),
                                                ("signal_kill", signal.SIGKILL)])
async def test_escalation_ladder_ends_with_status_exited(agent: Client, action: str,
                                                         signum: int) -> None:
    job = await call(agent, "terminal_job_start", command="sleep 300")
    managed = await call(agent, "terminal_job_manage", action=action, job_id=job["job_id"])
    assert managed["ok"] is True
    # "After signaling, check exit with terminal_job_logs(job_id, wait_until_exit=True,
    # wait_timeout_sec=2)"; signals.md: exit_code -N.
    page = await call(agent, "terminal_job_logs", job_id=job["job_id"], wait_until_exit=True,
                      wait_timeout_sec=2)
    assert page["status"] == "exited" and page["exit_code"] == -signum
    assert page["end_reason"] == "killed" and page["semantic_status"] == "signal"
    listed = await call(agent, "terminal_job_manage", action="list")
    entry = next(j for j in listed["jobs"] if j["job_id"] == job["job_id"])
    assert entry["status"] == "exited" and entry["end_reason"] == "killed"
    assert listed["ok"] is True


async def test_deadline_ends_with_status_exited_and_end_reason_timeout(agent: Client) -> None:
    job = await call(agent, "terminal_job_start", command="sleep 300", timeout_sec=0.5)
    page = await call(agent, "terminal_job_logs", job_id=job["job_id"], since_offset=0,
                      wait_until_exit=True, wait_timeout_sec=60)
    assert page["status"] == "exited" and page["end_reason"] == "timeout"
    assert page["timed_out"] is True and page["semantic_status"] == "error"


async def test_a_signal_from_outside_is_end_reason_signal(agent: Client) -> None:
    job = await call(agent, "terminal_job_start", command="sleep 300")
    os.kill(job["pid"], signal.SIGTERM)
    page = await call(agent, "terminal_job_logs", job_id=job["job_id"], wait_until_exit=True,
                      wait_timeout_sec=10)
    assert page["status"] == "exited" and page["end_reason"] == "signal"
    assert page["exit_code"] == -signal.SIGTERM


async def test_jobs_ended_by_the_server_stopping_say_shutdown(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    async with make_client(audit_log=str(audit)) as c:
        job = await call(c, "terminal_job_start", command="sleep 300")
    ends = [json.loads(line) for line in audit.read_text().splitlines()]
    ends = [e for e in ends if e.get("event") == "job_exit" and e.get("job_id") == job["job_id"]]
    assert ends and ends[0]["status"] == "exited" and ends[0]["end_reason"] == "shutdown"


async def test_promoted_command_past_its_deadline_reports_exited(agent: Client) -> None:
    result = await call(agent, "terminal_exec", command="sleep 300", timeout_sec=1.5,
                        auto_background_after_sec=0.3)
    assert result["auto_backgrounded"] is True and result["exit_code"] is None
    # The take-over calls of the skill.
    tail = await call(agent, "terminal_job_logs", job_id=result["job_id"], tail=True,
                      max_bytes=64000)
    assert tail["status"] == "running"
    page = await call(agent, "terminal_job_logs", job_id=result["job_id"], since_offset=0,
                      wait_until_exit=True, wait_timeout_sec=120)
    assert page["status"] == "exited" and page["end_reason"] == "timeout"
    assert any("capped" in note for note in page["notes"])


async def test_merge_stderr_streams_by_name(agent: Client) -> None:
    split = await call(agent, "terminal_job_start", command="bash -c 'echo out; echo err >&2'",
                       merge_stderr=False)
    out = await call(agent, "terminal_job_logs", job_id=split["job_id"], stream="stdout",
                     wait_until_exit=True)
    err = await call(agent, "terminal_job_logs", job_id=split["job_id"], stream="stderr")
    assert out["data"] == "out\n" and err["data"] == "err\n"
    merged = await call(agent, "terminal_job_start", command="bash -c 'echo out; echo err >&2'",
                        merge_stderr=True)
    page = await call(agent, "terminal_job_logs", job_id=merged["job_id"], stream="merged",
                      wait_until_exit=True)
    assert page["data"] == "out\nerr\n"


async def test_stdin_then_close_stdin(agent: Client) -> None:
    job = await call(agent, "terminal_job_start", command="cat")
    wrote = await call(agent, "terminal_job_manage", action="stdin", job_id=job["job_id"],
                       data="some input\n")
    assert wrote["ok"] is True and wrote["bytes_written"] == len("some input\n")
    closed = await call(agent, "terminal_job_manage", action="close_stdin",
                        job_id=job["job_id"])
    assert closed["ok"] is True
    page = await call(agent, "terminal_job_logs", job_id=job["job_id"], since_offset=0,
                      wait_until_exit=True, wait_timeout_sec=60)
    assert page["data"] == "some input\n" and page["status"] == "exited"
    assert page["end_reason"] == "exit" and page["truncated_bytes_dropped"] == 0


async def test_past_the_job_cap_the_error_says_too_many_jobs(project: Path) -> None:
    async with make_client(max_jobs=1) as c:
        await call(c, "terminal_job_start", command="sleep 300")
        error = await call_error(c, "terminal_job_start", command="sleep 300")
    assert "too many jobs" in error


# -- filesystem search: terminal-tools-fs-search -------------------------------------------


async def test_rg_type_filter(agent: Client) -> None:
    result = await call(agent, "terminal_rg", pattern="TODO", path=".", type_filter="py")
    assert [(m["path"], m["line"]) for m in result["matches"]] == [("src/app.py", 5)]
    assert result["truncated"] is None


async def test_rg_glob_as_a_string_and_as_a_list(agent: Client) -> None:
    one = await call(agent, "terminal_rg", pattern="version", path=".", glob="*.toml")
    assert {m["path"] for m in one["matches"]} == {"pyproject.toml"}
    many = await call(agent, "terminal_rg", pattern="version", path=".",
                      glob=["*.toml", "*.cfg"])
    assert {m["path"] for m in many["matches"]} == {"pyproject.toml", "setup.cfg"}


async def test_rg_ignore_case_with_context_in_var_log(agent: Client) -> None:
    if not os.path.isdir("/var/log"):
        pytest.skip("no /var/log here")
    result = await call(agent, "terminal_rg", pattern="error", path="/var/log",
                        ignore_case=True, context=2)
    assert isinstance(result["matches"], list) and "truncated" in result


async def test_rg_hidden_under_home(agent: Client, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".env").write_text("api_key=abc\n")
    monkeypatch.setenv("HOME", str(home))
    hidden = await call(agent, "terminal_rg", pattern="api_key", path="~", hidden=True)
    assert [m["path"] for m in hidden["matches"]] == [".env"]


async def test_rg_no_ignore(agent: Client) -> None:
    plain = await call(agent, "terminal_rg", pattern="generated", path=".")
    result = await call(agent, "terminal_rg", pattern="generated", path=".", no_ignore=True)
    assert plain["matches"] == []
    assert {m["path"] for m in result["matches"]} == {"build/generated.py"}


async def test_rg_cheatsheet_compositions(agent: Client) -> None:
    imports = await call(agent, "terminal_rg", pattern=r"^import\s+\w+$", path="src",
                         type_filter="py")
    assert [m["text"] for m in imports["matches"]] == ["import os"]
    defs = await call(agent, "terminal_rg", pattern=r"^def\s+\w+", path=".", type_filter="py")
    assert [m["line"] for m in defs["matches"]] == [4, 9]


async def test_glob_bare_stem_widens_and_says_expanded_pattern(agent: Client) -> None:
    result = await call(agent, "terminal_glob", pattern="lk_scan_post_reactors",
                        path="core/framework/skills")
    assert result["expanded_pattern"] == "**/*lk_scan_post_reactors*"
    assert result["paths"] == ["nested/lk_scan_post_reactors.md"] and result["count"] == 1
    assert result["truncated"] is None and result["timed_out"] is False


async def test_glob_yaml_under_etc(agent: Client) -> None:
    result = await call(agent, "terminal_glob", pattern="*.yaml", path="/etc")
    assert result["expanded_pattern"] == "**/*.yaml"
    assert all(p.endswith(".yaml") for p in result["paths"])
    assert result["count"] >= len(result["paths"])


async def test_glob_include_ignored(agent: Client) -> None:
    plain = await call(agent, "terminal_glob", pattern="*.log", path=".")
    result = await call(agent, "terminal_glob", pattern="*.log", path=".", include_ignored=True)
    # Without it, the ignored build/ folder is not entered.
    assert plain["paths"] == ["server.log"]
    assert sorted(result["paths"]) == ["build/out.log", "server.log"]


async def test_glob_past_max_results_is_truncated(agent: Client) -> None:
    result = await call(agent, "terminal_glob", pattern="*", path=".", max_results=1)
    assert result["truncated"] and len(result["paths"]) == 1 and result["count"] > 1


# -- foundations: terminal-tools-foundations and its exit-code reference ------------------


async def test_a_timeout_is_semantic_error_not_signal(agent: Client) -> None:
    result = await call(agent, "terminal_exec", command="sleep 30", timeout_sec=0.5,
                        auto_background_after_sec=0)
    assert result["timed_out"] is True and result["semantic_status"] == "error"
    assert result["exit_code"] is not None and result["auto_backgrounded"] is False


async def test_shell_kind_is_null_when_nothing_started(agent: Client) -> None:
    result = await call(agent, "terminal_exec", command="no-such-program-here --x")
    assert result["exit_code"] is None and result["pid"] is None and result["error"]
    assert result["shell_kind"] is None and result["semantic_status"] == "error"

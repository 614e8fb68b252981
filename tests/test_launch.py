"""The launch gate: one place decides whether and how a command starts, and each kind of
error reaches the agent one way."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import call, call_error, make_client

pytestmark = pytest.mark.anyio


async def test_each_error_kind_reaches_the_agent_one_way(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[[deny]]\ncommand = "shred"\nmessage = "no shredding"\n')
    async with make_client(policy=str(policy), max_jobs=1, workdir=str(tmp_path)) as c:
        # not found, invalid input, cap reached: tool errors that say what to change
        assert "unknown job" in await call_error(c, "terminal_job_logs", job_id="job_nope")
        assert "does not exist" in await call_error(
            c, "terminal_job_start", command="true", cwd="no-such-dir")
        job = await call(c, "terminal_job_start", command="sleep 30")
        assert "since_offset must be >= 0" in await call_error(
            c, "terminal_job_logs", job_id=job["job_id"], since_offset=-1)
        assert "too many jobs" in await call_error(
            c, "terminal_job_start", command="sleep 30")
        # blocked: the tool's own result
        refused = await call(c, "terminal_job_start", command="shred x")
        assert refused["blocked"] is True and "no shredding" in refused["error"]
        await call(c, "terminal_job_manage", action="signal_kill", job_id=job["job_id"])


async def test_a_switched_off_tool_refuses_before_reading_its_input(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text("[switches]\nexec = false\npty = false\n")
    async with make_client(policy=str(policy)) as c:
        result = await call(c, "terminal_exec", command="echo 'unbalanced", cwd="/no/such")
        assert result["blocked"] is True and "switched off" in result["error"]
        opened = await call(c, "terminal_pty_open", cwd="/no/such", shell="zsh")
        assert opened["blocked"] is True and "switched off" in opened["error"]


async def test_a_policy_refusal_comes_before_looking_for_the_program(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[[deny]]\ncommand = "no-such-program-xyz"\nmessage = "not that"\n')
    async with make_client(policy=str(policy)) as c:
        result = await call(c, "terminal_exec", command="no-such-program-xyz --go")
        assert result["blocked"] is True and "not that" in result["error"]
        job = await call(c, "terminal_job_start", command="no-such-program-xyz --go")
        assert job["blocked"] is True


async def test_pty_session_starts_in_the_directory_the_gate_resolved(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    async with make_client(workdir=str(tmp_path)) as c:
        opened = await call(c, "terminal_pty_open", cwd="sub")
        assert opened["cwd"] == str(tmp_path / "sub") and opened["blocked"] is False
        ran = await call(c, "terminal_pty_run", session_id=opened["session_id"], command="pwd")
        assert ran["output"].strip() == str(tmp_path / "sub")
        assert "does not exist" in await call_error(c, "terminal_pty_open", cwd="nope")
        await call(c, "terminal_pty_close", session_id=opened["session_id"])

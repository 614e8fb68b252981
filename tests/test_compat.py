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



async def test_rg_extra_args_multiline(agent: Client) -> None:
    result = await call(agent, "terminal_rg", pattern=r"def\s+\w+\(.*\n.*\n", path="src",
                        extra_args=["--multiline"])
    assert {m["line"] for m in result["matches"]} >= {4, 5, 9, 10}


async def test_rg_extra_args_line_numbers_are_always_there(agent: Client) -> None:
    result = await call(agent, "terminal_rg", pattern=r"\b(TODO|FIXME|XXX)\b", path=".",
                        extra_args=["-n"])
    assert [(m["path"], m["line"]) for m in result["matches"]] == [("src/app.py", 5),
                                                                   ("src/notes.txt", 1)]


async def test_rg_extra_args_count_word_and_fixed(agent: Client, project: Path) -> None:
    (project / "words.txt").write_text("cat\ncatalog\ncat cat\na.b\naxb\n")
    counted = await call(agent, "terminal_rg", pattern="TODO", extra_args=["-c"])
    assert counted["counts"] == [{"path": "src/app.py", "count": 1},
                                 {"path": "src/notes.txt", "count": 1}]
    word = await call(agent, "terminal_rg", pattern="cat", path="words.txt", extra_args=["-w"])
    assert [m["line"] for m in word["matches"]] == [1, 3]
    fixed = await call(agent, "terminal_rg", pattern="a.b", path="words.txt",
                       extra_args=["-F", "-w"])
    assert [m["line"] for m in fixed["matches"]] == [4]
    files = await call(agent, "terminal_rg", pattern="version", extra_args=["-l", "-g",
                                                                            "*.toml"])
    assert files["files"] == ["pyproject.toml"] and files["counts"] is None


async def test_rg_extra_args_that_could_run_programs_are_refused(agent: Client) -> None:
    error = await call_error(agent, "terminal_rg", pattern="x", extra_args=["--pre=sh"])
    assert "--pre=sh" in error and "terminal_exec" in error


async def test_rg_is_on_the_commands_path(agent: Client) -> None:
    # The skills recommend rg inside commands; the server ships one.
    result = await call(agent, "terminal_exec", command="rg -c TODO src/app.py")
    assert result["exit_code"] == 0 and result["stdout"] == "1\n"
    info = json.loads((await agent.read_resource("terminal://server-info"))[0].text)
    assert info["children_rg"]


async def test_bundled_rg_goes_at_the_end_of_path_and_a_users_rg_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from terminal_tools.core.search import find_ripgrep

    bundled = find_ripgrep()
    if bundled is None:
        pytest.skip("no rg at all")
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "true").symlink_to("/bin/true")
    monkeypatch.setenv("PATH", str(bare))
    async with make_client() as c:
        info = json.loads((await c.read_resource("terminal://server-info"))[0].text)
        result = await call(c, "terminal_exec", command="echo \"$PATH\"", shell="/bin/bash")
    assert info["children_rg"].startswith("bundled")
    assert result["stdout"].strip() == f"{bare}{os.pathsep}{os.path.dirname(bundled)}"
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "rg").write_text("#!/bin/sh\necho mine\n")
    (mine / "rg").chmod(0o755)
    monkeypatch.setenv("PATH", f"{mine}{os.pathsep}/usr/bin{os.pathsep}/bin")
    async with make_client() as c:
        info = json.loads((await c.read_resource("terminal://server-info"))[0].text)
        result = await call(c, "terminal_exec", command="rg anything")
    assert info["children_rg"] == f"on PATH: {mine / 'rg'}"
    assert result["stdout"] == "mine\n"


# -- PTY sessions: terminal-tools-pty-sessions ---------------------------------------------


async def pty(client: Client, session_id: str, **arguments: object) -> dict:
    return await call(client, "terminal_pty_run", session_id=session_id, **arguments)


async def test_pty_default_mode_returns_prompt_after(agent: Client) -> None:
    sid = (await call(agent, "terminal_pty_open", cwd="/"))["session_id"]
    await pty(agent, sid, command="cd /var/log" if os.path.isdir("/var/log") else "cd /tmp")
    result = await pty(agent, sid, command="ls -la")
    assert result["prompt_after"] is True and result["output"] and result["exit_code"] == 0
    await call(agent, "terminal_pty_close", session_id=sid)


async def test_pty_raw_send_true_then_read_only(agent: Client) -> None:
    sid = (await call(agent, "terminal_pty_open"))["session_id"]
    started = await pty(agent, sid, command="python3 -q", expect=r">>>\s*$", timeout_sec=30)
    assert started["matched"] is True
    sent = await pty(agent, sid, command="print('hi')\n", raw_send=True)
    assert sent["bytes_sent"] == 12 and sent["output"] == ""
    drained = await pty(agent, sid, read_only=True, timeout_sec=2)
    assert "hi\r\n" in drained["output"] or "hi\n" in drained["output"]
    assert drained["more"] is False
    await call(agent, "terminal_pty_close", session_id=sid, force=True)


async def test_pty_python_repl_walkthrough(agent: Client) -> None:
    # The skill's REPL example, call for call. It types "x = 42" without a newline and
    # then "print(x*x)\n": raw_send=true types exactly what it is given, so the REPL
    # reads one line, "x = 42print(x*x)", as a terminal would have it.
    sid = (await call(agent, "terminal_pty_open"))["session_id"]
    await pty(agent, sid, command="python3", expect=r">>>\s*$")
    assert (await pty(agent, sid, command="x = 42", raw_send=True))["bytes_sent"] == 6
    await pty(agent, sid, command="print(x*x)\n", raw_send=True)
    result = await pty(agent, sid, read_only=True)
    assert "x = 42print(x*x)" in result["output"] and "SyntaxError" in result["output"]
    # With the newline the skill meant, the answer is there.
    await pty(agent, sid, command="x = 42\n", raw_send=True)
    await pty(agent, sid, command="print(x*x)\n", raw_send=True)
    answer = await pty(agent, sid, expect="1764")
    assert answer["matched"] is True
    await pty(agent, sid, command="exit()", raw_send=True)
    await call(agent, "terminal_pty_close", session_id=sid, force=True)


async def test_pty_password_prompt_shape(agent: Client) -> None:
    # The sudo example's shape (no password-protected sudo here): expect the prompt,
    # answer with raw_send=true, read the result.
    sid = (await call(agent, "terminal_pty_open"))["session_id"]
    asked = await pty(agent, sid, command="read -s -p 'Password: ' pw && echo got ${#pw}",
                      expect=r"[Pp]assword:")
    assert asked["matched"] is True and asked["prompt_after"] is False
    await pty(agent, sid, command="s3cret\n", raw_send=True)
    result = await pty(agent, sid, read_only=True, timeout_sec=5)
    assert "got 6" in result["output"] and result["prompt_after"] is True
    await call(agent, "terminal_pty_close", session_id=sid)


async def test_pty_string_raw_send_keeps_named_keys(agent: Client) -> None:
    sid = (await call(agent, "terminal_pty_open"))["session_id"]
    sent = await pty(agent, sid, raw_send="echo keys{Enter}")
    assert sent["bytes_sent"] == len("echo keys\r")
    result = await pty(agent, sid, read_only=True, timeout_sec=2)
    assert "keys" in result["output"]
    verbatim = await pty(agent, sid, command="echo '{Enter}'\n", raw_send=True)
    assert verbatim["bytes_sent"] == len("echo '{Enter}'\n")
    result = await pty(agent, sid, read_only=True, timeout_sec=2)
    assert "{Enter}" in result["output"]
    error = await call_error(agent, "terminal_pty_run", session_id=sid, raw_send=True)
    assert "command" in error
    await call(agent, "terminal_pty_close", session_id=sid)


async def test_pty_busy_is_an_error_that_says_session_busy(agent: Client) -> None:
    sid = (await call(agent, "terminal_pty_open"))["session_id"]
    await pty(agent, sid, command="sleep 5", timeout_sec=0.2)
    busy = await pty(agent, sid, command="echo hi")
    assert busy["busy"] is True and busy["error"].startswith("session busy: ")
    assert "Ctrl-C" in busy["error"] and busy["prompt_after"] is False
    await call(agent, "terminal_pty_close", session_id=sid, force=True)


async def test_pty_cap_error_says_cap_reached() -> None:
    async with make_client(max_pty_sessions=1) as c:
        await call(c, "terminal_pty_open")
        error = await call_error(c, "terminal_pty_open")
    assert "PTY cap reached" in error


async def test_pty_first_run_noop_and_drain(agent: Client) -> None:
    # troubleshooting: "a noop command (terminal_pty_run(sid, command="true"))" and a drain.
    sid = (await call(agent, "terminal_pty_open"))["session_id"]
    drained = await pty(agent, sid, read_only=True, timeout_sec=2)
    assert "output" in drained
    noop = await pty(agent, sid, command="true")
    assert noop["exit_code"] == 0 and noop["prompt_after"] is True
    await call(agent, "terminal_pty_close", session_id=sid)


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



async def test_files_are_read_written_and_edited_through_exec(agent: Client) -> None:
    wrote = await call(agent, "terminal_exec",
                       command="cat > notes.md <<'EOF'\nfirst line\nsecond line\nEOF")
    assert wrote["semantic_status"] == "ok" and wrote["auto_shell"] is True
    await call(agent, "terminal_exec", command="sed -i 's/second/2nd/' notes.md")
    read = await call(agent, "terminal_exec", command="cat notes.md")
    assert read["stdout"] == "first line\n2nd line\n" and read["shell_kind"] == "direct"


async def test_the_envelope_has_every_field_the_skill_lists(agent: Client) -> None:
    result = await call(agent, "terminal_exec", command="ls -la")
    for name in ("exit_code", "stdout", "stderr", "stdout_truncated_bytes",
                 "stderr_truncated_bytes", "runtime_ms", "pid", "output_handle", "timed_out",
                 "semantic_status", "semantic_message", "warning", "auto_backgrounded",
                 "job_id", "shell_kind"):
        assert name in result, name
    assert result["semantic_status"] == "ok" and result["exit_code"] == 0


async def test_pipelines_route_through_bash(agent: Client) -> None:
    result = await call(agent, "terminal_exec", command="ps aux | sort -k3 -rn | head -40")
    assert result["exit_code"] == 0 and result["auto_shell"] is True and result["stdout"]
    explicit = await call(agent, "terminal_exec", command="set -e; true; echo fine", shell=True)
    assert explicit["stdout"] == "fine\n" and explicit["shell_kind"] == "bash"


async def test_zsh_is_refused(agent: Client) -> None:
    result = await call(agent, "terminal_exec", command="echo hi", shell="/bin/zsh")
    assert result["error"] and "zsh" in result["error"] and result["exit_code"] is None


async def test_grep_exit_1_is_ok_with_a_message(agent: Client) -> None:
    result = await call(agent, "terminal_exec", command="grep nomatch pyproject.toml")
    assert result["exit_code"] == 1 and result["semantic_status"] == "ok"
    assert result["semantic_message"] == "No matches found"
    for command in ("diff pyproject.toml setup.cfg", "test -e nothing-here"):
        other = await call(agent, "terminal_exec", command=command)
        assert other["exit_code"] == 1 and other["semantic_status"] == "ok", command


async def test_destructive_warning_and_the_command_still_ran(agent: Client, project: Path) -> None:
    (project / "junk").mkdir()
    result = await call(agent, "terminal_exec", command="rm -rf junk")
    assert result["warning"] and result["exit_code"] == 0 and not (project / "junk").exists()


async def test_a_signal_is_a_negative_exit_code(agent: Client) -> None:
    result = await call(agent, "terminal_exec", command="python3 -c 'import os; os.kill(os.getpid(), 9)'")
    assert result["exit_code"] == -9 and result["semantic_status"] == "signal"


async def test_pure_foreground_with_auto_background_after_sec_0(agent: Client) -> None:
    result = await call(agent, "terminal_exec", command="sleep 0.5", auto_background_after_sec=0)
    assert result["auto_backgrounded"] is False and result["exit_code"] == 0


async def test_auto_promotion_then_wait_until_exit(agent: Client) -> None:
    result = await call(agent, "terminal_exec", command="bash -c 'echo a; sleep 1; echo b'",
                        auto_background_after_sec=0.3)
    assert result["auto_backgrounded"] is True and result["exit_code"] is None
    page = await call(agent, "terminal_job_logs", job_id=result["job_id"], since_offset=0,
                      wait_until_exit=True, wait_timeout_sec=60)
    assert page["status"] == "exited" and page["data"] == "a\nb\n" and page["exit_code"] == 0


async def test_output_get_pages_the_stream_that_was_cut(agent: Client) -> None:
    # Only stderr overflows: the skill's plain call must page stderr, and say stdout's size.
    result = await call(agent, "terminal_exec", max_output_kb=1,
                        command="python3 -c \"import sys; print('out'); "
                                "sys.stderr.write('e' * 5000)\"")
    assert result["stderr_truncated_bytes"] > 0 and result["stdout_truncated_bytes"] == 0
    page = await call(agent, "terminal_output_get", output_handle=result["output_handle"],
                      since_offset=0, max_kb=64)
    assert {"data", "offset", "next_offset", "eof", "expired"} <= page.keys()
    assert page["stream"] == "stderr" and page["data"] == "e" * 5000 and page["eof"]
    assert page["other_stream_bytes"] == 4
    stdout = await call(agent, "terminal_output_get", output_handle=result["output_handle"],
                        stream="stdout")
    assert stdout["data"] == "out\n" and stdout["other_stream_bytes"] == 5000


async def test_output_get_defaults_to_stdout_when_both_were_cut(agent: Client) -> None:
    result = await call(agent, "terminal_exec", max_output_kb=1,
                        command="python3 -c \"import sys; print('o' * 3000); "
                                "sys.stderr.write('e' * 2000)\"")
    assert result["stdout_truncated_bytes"] > 0 and result["stderr_truncated_bytes"] > 0
    page = await call(agent, "terminal_output_get", output_handle=result["output_handle"],
                      since_offset=0)
    assert page["stream"] == "stdout" and page["other_stream_bytes"] == 2000


# -- troubleshooting: terminal-tools-troubleshooting ---------------------------------------


async def test_expired_handle_says_expired(agent: Client) -> None:
    page = await call(agent, "terminal_output_get", output_handle="out_0000000000000000",
                      since_offset=0)
    assert page["expired"] is True


async def test_exit_code_null_cases(agent: Client) -> None:
    missing = await call(agent, "terminal_exec", command="definitely-not-a-command")
    assert missing["exit_code"] is None and missing["error"] and missing["pid"] is None
    job = await call(agent, "terminal_job_start", command="sleep 300")
    page = await call(agent, "terminal_job_logs", job_id=job["job_id"])
    assert page["status"] == "running" and page["exit_code"] is None
    await call(agent, "terminal_job_manage", action="signal_kill", job_id=job["job_id"])


async def test_glob_past_its_time_limit_says_timed_out(tmp_path: Path) -> None:
    for index in range(20000):
        (tmp_path / f"f{index:05}.txt").write_text("")
    async with make_client(search_engine="python", search_timeout_sec=0.01) as c:
        result = await call(c, "terminal_glob", pattern="*.txt", path=str(tmp_path),
                            max_results=100000)
    assert result["timed_out"] is True and result["truncated"] == "timeout"
    assert len(result["paths"]) < 20000


async def test_find_predicate_calls(agent: Client) -> None:
    either = await call(agent, "terminal_exec",
                        command=r"find . \( -name '*.log' -o -name '*.txt' \) -type f",
                        shell=True)
    assert sorted(either["stdout"].split()) == ["./build/out.log", "./server.log",
                                                "./src/notes.txt"]
    pruned = await call(agent, "terminal_exec",
                        command="find . -path '*/build' -prune -o -name '*.py' -print",
                        shell=True)
    assert pruned["stdout"].split() == ["./src/app.py"] and pruned["semantic_status"] == "ok"

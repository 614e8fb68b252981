"""terminal_exec through the MCP protocol: envelope, routing, output, timeouts, errors."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest
from fastmcp import Client

from .conftest import call, call_error, make_client, new_mark, wait_until_gone

pytestmark = pytest.mark.anyio

ENVELOPE = {
    "exit_code": (int, type(None)), "stdout": str, "stderr": str,
    "stdout_truncated_bytes": int, "stderr_truncated_bytes": int, "runtime_ms": int,
    "pid": (int, type(None)), "output_handle": (str, type(None)), "timed_out": bool,
    "semantic_status": str, "semantic_message": (str, type(None)),
    "warning": (str, type(None)), "auto_backgrounded": bool, "job_id": (str, type(None)),
    "shell_kind": (str, type(None)), "auto_shell": bool,
}


def assert_envelope(result: dict) -> None:
    for field, kind in ENVELOPE.items():
        assert field in result, f"missing {field}"
        assert isinstance(result[field], kind), f"{field}={result[field]!r}"
    assert result["semantic_status"] in ("ok", "signal", "error")


async def test_success_envelope(client: Client) -> None:
    result = await call(client, "terminal_exec", command="echo hello")
    assert_envelope(result)
    assert result["exit_code"] == 0 and result["stdout"] == "hello\n"
    assert result["shell_kind"] == "direct" and result["auto_shell"] is False
    assert result["semantic_status"] == "ok" and result["output_handle"] is None


async def test_failure_envelope(client: Client) -> None:
    result = await call(client, "terminal_exec", command="ls /definitely/not/here")
    assert_envelope(result)
    assert result["exit_code"] == 2 and result["semantic_status"] == "error"
    assert "No such file" in result["stderr"]


async def test_pre_spawn_error_envelope(client: Client) -> None:
    result = await call(client, "terminal_exec", command="ls", cwd="/definitely/not/here")
    assert_envelope(result)
    assert result["exit_code"] is None and result["pid"] is None
    assert result["semantic_status"] == "error"
    assert "does not exist" in result["error"]


async def test_shell_syntax_routes_through_bash(client: Client) -> None:
    result = await call(client, "terminal_exec", command="echo a | tr a b && echo $((1+2))")
    assert result["stdout"] == "b\n3\n"
    assert result["shell_kind"] == "bash" and result["auto_shell"] is True


async def test_redirection_without_spaces_is_shell(client: Client, tmp_path: Path) -> None:
    result = await call(client, "terminal_exec", command="echo hi>out.txt", cwd=str(tmp_path))
    assert result["auto_shell"] is True
    assert (tmp_path / "out.txt").read_text() == "hi\n"


async def test_quoted_arguments_are_not_split(client: Client) -> None:
    result = await call(client, "terminal_exec", command="printf '%s|' 'a b' \"c d\" e")
    assert result["stdout"] == "a b|c d|e|"
    assert result["shell_kind"] == "direct"


async def test_grep_without_match_is_ok(client: Client, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("hello\n")
    result = await call(client, "terminal_exec", command="grep zzz f", cwd=str(tmp_path))
    assert result["exit_code"] == 1
    assert result["semantic_status"] == "ok"
    assert result["semantic_message"] == "No matches found"


async def test_command_not_found_through_bash_is_127(client: Client) -> None:
    result = await call(client, "terminal_exec", command="true && no_such_cmd_xyz --flag")
    assert result["exit_code"] == 127
    assert result["semantic_message"] == "command not found: no_such_cmd_xyz"


async def test_command_not_found_direct_is_pre_spawn(client: Client) -> None:
    result = await call(client, "terminal_exec", command="no_such_cmd_xyz --flag")
    assert result["exit_code"] is None
    assert result["error"].startswith("command not found: no_such_cmd_xyz")


async def test_killed_by_signal(client: Client) -> None:
    result = await call(client, "terminal_exec", command="bash -c 'kill -9 $$'")
    assert result["exit_code"] == -9
    assert result["semantic_status"] == "signal" and "SIGKILL" in result["semantic_message"]


async def test_shell_128_plus_n_is_a_signal(client: Client) -> None:
    result = await call(client, "terminal_exec", command="sleep 5 & kill -TERM $!; wait $!")
    assert result["exit_code"] == 143
    assert result["semantic_status"] == "signal" and "SIGTERM" in result["semantic_message"]


async def test_warning_is_reported_and_command_still_runs(client: Client,
                                                          tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    result = await call(client, "terminal_exec", command="rm -rf d", cwd=str(tmp_path))
    assert result["exit_code"] == 0 and not (tmp_path / "d").exists()
    assert "rm -rf" in result["warning"]
    result = await call(client, "terminal_exec", command='echo "rm -rf /"')
    assert result["warning"] is None


async def test_timeout_kills_the_whole_tree(client: Client) -> None:
    mark = new_mark()
    started = time.monotonic()
    result = await call(client, "terminal_exec",
                        command="bash -c 'sleep 300 & sleep 300; wait'", timeout_sec=1,
                        env={"TT_TEST_MARK": mark})
    elapsed = time.monotonic() - started
    assert_envelope(result)
    assert result["timed_out"] is True and result["semantic_status"] == "error"
    assert elapsed < 1 + 5  # the 1 s limit, the kill grace, and slack for a loaded machine
    assert not await wait_until_gone(mark, timeout=5)


async def test_timeout_keeps_output_so_far(client: Client) -> None:
    result = await call(client, "terminal_exec", command="echo before; sleep 30",
                        timeout_sec=1)
    assert result["timed_out"] and result["stdout"] == "before\n"


async def test_big_output_keeps_head_and_tail_and_handle_is_byte_exact(client: Client) -> None:
    # 1 MiB whose last line is the error an agent needs to see.
    command = ("python3 -c \"import sys; sys.stdout.write(''.join('line %07d\\n' % i for i in "
               "range(80000))); print('FINAL_ERROR')\"")
    result = await call(client, "terminal_exec", command=command, max_output_kb=16)
    assert "line 0000000" in result["stdout"]
    assert result["stdout"].rstrip().endswith("FINAL_ERROR")
    assert "bytes omitted" in result["stdout"]
    assert result["stdout_truncated_bytes"] > 0 and result["output_handle"]
    assert len(result["stdout"].encode()) < 17 * 1024
    data = b""
    offset = 0
    while True:
        page = await call(client, "terminal_output_get", output_handle=result["output_handle"],
                          since_offset=offset, max_kb=256)
        data += page["data"].encode()
        offset = page["next_offset"]
        if page["eof"]:
            break
    expected = "".join(f"line {i:07d}\n" for i in range(80000)) + "FINAL_ERROR\n"
    assert data == expected.encode()
    assert result["stdout_bytes"] == len(expected)


async def test_twenty_mib_is_retrievable_byte_exact(client: Client) -> None:
    command = "head -c 20971520 /dev/urandom | base64 -w 100 | tee /dev/stderr | sha256sum"
    result = await call(client, "terminal_exec", command=command, max_output_kb=4)
    expected_sha = result["stdout"].split()[0]
    handle = result["output_handle"]
    assert handle and result["output_dropped_bytes"] == 0
    digest = hashlib.sha256()
    offset = 0
    while True:
        page = await call(client, "terminal_output_get", output_handle=handle,
                          stream="stderr", since_offset=offset, max_kb=8192)
        digest.update(page["data"].encode())
        offset = page["next_offset"]
        if page["eof"]:
            break
    assert digest.hexdigest() == expected_sha


async def test_hundred_mib_stays_bounded_and_says_what_was_not_kept(client: Client) -> None:
    import psutil

    before = psutil.Process().memory_info().rss
    # On a loaded machine 100 MiB can take longer than the promotion budget: keep it in
    # the foreground (the promise is about memory and counting, not speed).
    result = await call(client, "terminal_exec", command="head -c 104857600 /dev/zero",
                        max_output_kb=4, auto_background_after_sec=0, timeout_sec=600)
    after = psutil.Process().memory_info().rss
    assert result["stdout_bytes"] == 104857600
    assert result["output_dropped_bytes"] > 0
    assert any("not kept" in note for note in result["notes"])
    assert after - before < 80 * 1024 * 1024


async def test_multibyte_characters_survive_every_page_boundary(client: Client) -> None:
    text = "é€😀" * 3000 + "\n"
    command = f"python3 -c \"print('{'é€😀' * 3000}')\""
    result = await call(client, "terminal_exec", command=command, max_output_kb=1)
    handle = result["output_handle"]
    for page_kb in (1, 3):
        pieces = []
        offset = 0
        while True:
            page = await call(client, "terminal_output_get", output_handle=handle,
                              since_offset=offset, max_kb=page_kb)
            assert "\ufffd" not in page["data"]
            pieces.append(page["data"])
            offset = page["next_offset"]
            if page["eof"]:
                break
        assert "".join(pieces) == text


async def test_large_stdin_does_not_deadlock(client: Client) -> None:
    payload = ("x" * 1023 + "\n") * 10240  # 10 MiB
    result = await call(client, "terminal_exec", command="cat", stdin=payload,
                        max_output_kb=1, timeout_sec=60)
    assert result["exit_code"] == 0 and result["stdout_bytes"] == len(payload)


async def test_noise_control_strips_escapes_and_redraws(client: Client) -> None:
    command = r"printf '\033[31mred\033[0m\nprogress 10%%\rprogress 100%%\n'"
    result = await call(client, "terminal_exec", command=command)
    assert result["stdout"] == "red\nprogress 100%\n"
    raw = await call(client, "terminal_exec", command=command, raw=True)
    assert "\x1b[31m" in raw["stdout"] and "\r" in raw["stdout"]


async def test_binary_output_is_flagged(client: Client) -> None:
    result = await call(client, "terminal_exec", command="head -c 4096 /dev/urandom")
    assert result["output_handle"]
    assert any("binary" in note for note in result["notes"])


async def test_environment_hygiene(client: Client) -> None:
    result = await call(client, "terminal_exec",
                        command="env", env={"MY_VAR": "1", "PAGER": "less"})
    env = dict(line.split("=", 1) for line in result["stdout"].splitlines() if "=" in line)
    assert env["MY_VAR"] == "1"
    assert env["PAGER"] == "less"  # explicit env wins over hygiene
    assert env["GIT_PAGER"] == "cat" and env["GIT_TERMINAL_PROMPT"] == "0"
    assert "ZDOTDIR" not in env


async def test_zdotdir_is_dropped_even_without_env(tmp_path: Path) -> None:
    os.environ["ZDOTDIR"] = "/tmp/zsh"
    try:
        async with make_client() as c:
            result = await call(c, "terminal_exec", command="env")
        assert "ZDOTDIR" not in result["stdout"]
    finally:
        del os.environ["ZDOTDIR"]


async def test_stdin_is_empty_by_default(client: Client) -> None:
    result = await call(client, "terminal_exec", command="cat", timeout_sec=10)
    assert result["exit_code"] == 0 and result["stdout"] == ""


async def test_limits_are_applied(client: Client) -> None:
    result = await call(client, "terminal_exec", command="bash -c 'ulimit -n'",
                        limits={"nofile": 64})
    assert result["stdout"].strip() == "64"


@pytest.mark.parametrize("arguments,needle", [
    ({"command": ""}, "empty"),
    ({"command": "echo 'unterminated"}, "unbalanced single quote"),
    ({"command": "ls", "cwd": "/no/such/dir"}, "does not exist"),
    ({"command": "echo hi", "shell": "/bin/zsh"}, "zsh is not supported"),
    ({"command": "echo hi", "shell": "fish"}, "unsupported shell"),
    ({"command": "echo hi", "max_output_kb": 0}, "max_output_kb"),
    ({"command": "echo hi", "max_output_kb": 10**9}, "max_output_kb"),
    ({"command": "echo a\x00b"}, "NUL"),
])
async def test_bad_input_gets_an_error_envelope(client: Client, arguments: dict,
                                                needle: str) -> None:
    result = await call(client, "terminal_exec", **arguments)
    assert result["exit_code"] is None and result["semantic_status"] == "error"
    assert needle in result["error"]
    after = await call(client, "terminal_exec", command="echo still-serving")
    assert after["stdout"] == "still-serving\n"


@pytest.mark.parametrize("arguments", [
    {"command": "echo", "env": {"X": 1}},
    {"command": "echo", "limits": {"cpu": 1}},
    {"command": "echo", "limits": {"nofile": -1}},
    {"command": "echo", "timeout_sec": -1},
])
async def test_invalid_arguments_are_rejected_clearly(client: Client, arguments: dict) -> None:
    text = await call_error(client, "terminal_exec", **arguments)
    assert "validation error" in text.lower() or "input" in text.lower()
    after = await call(client, "terminal_exec", command="echo ok")
    assert after["exit_code"] == 0


async def test_unknown_output_handle_is_expired(client: Client) -> None:
    page = await call(client, "terminal_output_get", output_handle="out_nope")
    assert page["expired"] is True and "unknown or expired" in page["message"]


async def test_output_pattern_search(client: Client) -> None:
    command = ("python3 -c \"[print('ok', i) if i % 1000 else print('ERR', i) "
               "for i in range(1, 50001)]\"")
    result = await call(client, "terminal_exec", command=command, max_output_kb=1)
    page = await call(client, "terminal_output_get", output_handle=result["output_handle"],
                      pattern=r"^ERR", context=1)
    assert [m["line"] for m in page["matches"]] == list(range(1000, 50001, 1000))
    assert page["matches"][0]["before"] == ["ok 999"]
    assert page["matches"][0]["after"] == ["ok 1001"]


async def test_progress_is_reported_while_waiting() -> None:
    seen: list[tuple] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    from fastmcp import Client

    from terminal_tools.config import Settings
    from terminal_tools.server import build_server

    async with Client(build_server(Settings()), progress_handler=on_progress) as c:
        await call(c, "terminal_exec", command="sleep 2.5")
    assert len(seen) >= 2 and "running" in (seen[0][1] or "")


async def test_client_cancellation_kills_the_tree() -> None:
    import anyio

    mark = new_mark()
    async with make_client() as c:
        with anyio.move_on_after(1.5):
            await c.call_tool("terminal_exec", {
                "command": "bash -c 'sleep 300 & sleep 300'", "env": {"TT_TEST_MARK": mark}})
        assert not await wait_until_gone(mark, timeout=8)
        after = await call(c, "terminal_exec", command="echo alive")
        assert after["stdout"] == "alive\n"

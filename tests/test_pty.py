"""PTY sessions through the MCP protocol."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from fastmcp import Client

from .conftest import call, call_error, make_client, new_mark, wait_until_gone

pytestmark = pytest.mark.anyio


@pytest.fixture
async def session(client: Client) -> AsyncIterator[tuple[Client, str]]:
    opened = await call(client, "terminal_pty_open", cwd="/")
    yield client, opened["session_id"]


async def run(pair: tuple[Client, str], **arguments) -> dict:
    client, session_id = pair
    return await call(client, "terminal_pty_run", session_id=session_id, **arguments)


async def test_state_persists_and_cwd_is_reported(session: tuple[Client, str]) -> None:
    result = await run(session, command="cd /tmp")
    assert result["exit_code"] == 0 and result["cwd"] == "/tmp"
    assert (await run(session, command="pwd"))["output"] == "/tmp\n"
    await run(session, command="export X=1")
    assert (await run(session, command="echo $X"))["output"] == "1\n"


async def test_exit_codes_and_semantics(session: tuple[Client, str]) -> None:
    result = await run(session, command="false")
    assert result["exit_code"] == 1 and result["semantic_status"] == "error"
    result = await run(session, command="grep nomatch /etc/hostname")
    assert result["exit_code"] == 1 and result["semantic_status"] == "ok"


async def test_output_has_no_echo_prompt_or_marker(session: tuple[Client, str]) -> None:
    result = await run(session, command="echo one; echo two")
    assert result["output"] == "one\ntwo\n"


async def test_printing_ps1_or_the_marker_does_not_end_a_read(
        session: tuple[Client, str]) -> None:
    result = await run(session, command='echo "$PS1"; echo "[$PROMPT_COMMAND]"')
    assert result["output"] == "\n[__tt_prompt]\n" and result["exit_code"] == 0
    fake = r"printf '\033]7770;%s:%s;0;/fake\007' \"$__tt_secret\" 1; sleep 0.5; echo real"
    result = await run(session, command=fake)
    assert result["output"].endswith("real\n") and result["cwd"] == "/"
    result = await run(session, command="printf '\\033]7770;deadbeef:999;0;/x\\007'; echo ok")
    assert "ok" in result["output"] and result["exit_code"] == 0


async def test_multi_line_command_runs_as_one(session: tuple[Client, str]) -> None:
    result = await run(session, command="for i in 1 2\ndo echo n$i\ndone")
    assert result["output"] == "n1\nn2\n" and result["exit_code"] == 0


async def test_python_repl_with_expect_raw_send_and_read_only(
        session: tuple[Client, str]) -> None:
    started = await run(session, command="python3 -q", expect=">>> ")
    assert started["matched"] is True and started["running"] is True
    await run(session, raw_send="print(6*7){Enter}")
    result = await run(session, read_only=True)
    assert "42" in result["output"]
    await run(session, raw_send="{Ctrl-D}")
    result = await run(session, read_only=True)
    assert result["exit_code"] == 0 and result["running"] is False
    assert (await run(session, command="echo back"))["output"] == "back\n"


async def test_line_sent_to_a_running_program_with_expect(session: tuple[Client, str]) -> None:
    await run(session, command="python3 -q", expect=">>> ")
    result = await run(session, command="print(2**10)", expect="1024")
    assert result["matched"] is True
    await run(session, raw_send="exit(){Enter}")


async def test_screen_is_rendered(session: tuple[Client, str]) -> None:
    result = await run(session, command="printf '\\033[2J\\033[5;10Hhello'", screen=True)
    rows = result["screen"].split("\n")
    assert rows[4][9:14] == "hello"


async def test_busy_then_ctrl_c_then_next_run(session: tuple[Client, str]) -> None:
    result = await run(session, command="sleep 2", timeout_sec=0.3)
    assert result["timed_out"] is True and result["running"] is True
    busy = await run(session, command="echo hi")
    assert busy["busy"] is True and "sleep 2" in busy["message"]
    assert "Ctrl-C" in busy["message"]
    await run(session, raw_send="{Ctrl-C}")
    drained = await run(session, read_only=True)
    assert drained["exit_code"] == 130 and drained["semantic_status"] == "signal"
    assert (await run(session, command="echo next"))["output"] == "next\n"


async def test_timed_out_command_continues_cleanly(session: tuple[Client, str]) -> None:
    result = await run(session, command="sleep 0.6; echo late", timeout_sec=0.2)
    assert result["timed_out"] is True
    time.sleep(0.8)
    result = await run(session, read_only=True)
    assert result["output"] == "late\n" and result["exit_code"] == 0


async def test_resize_reaches_the_program(session: tuple[Client, str]) -> None:
    result = await run(session, command="stty size", cols=100, rows=30)
    assert result["output"] == "30 100\n"
    assert result["cols"] == 100 and result["rows"] == 30


async def test_warning_in_pty(session: tuple[Client, str], tmp_path) -> None:
    result = await run(session, command=f"rm -rf {tmp_path}/nothing")
    assert "rm -rf" in result["warning"]


async def test_close_leaves_no_descendants(client: Client) -> None:
    mark = new_mark()
    opened = await call(client, "terminal_pty_open", env={"TT_TEST_MARK": mark})
    await call(client, "terminal_pty_run", session_id=opened["session_id"],
               command="sleep 300 & setsid sleep 300 &")
    closed = await call(client, "terminal_pty_close", session_id=opened["session_id"])
    assert closed["session_id"] == opened["session_id"]
    assert not await wait_until_gone(mark, timeout=8)
    error = await call_error(client, "terminal_pty_run", session_id=opened["session_id"],
                             command="true")
    assert "unknown or closed" in error
    assert "already closed" in await call_error(client, "terminal_pty_close",
                                                session_id=opened["session_id"])


async def test_idle_session_is_reaped_without_other_calls() -> None:
    mark = new_mark()
    async with make_client() as c:
        opened = await call(c, "terminal_pty_open", idle_timeout_sec=1,
                            env={"TT_TEST_MARK": mark})
        await call(c, "terminal_pty_run", session_id=opened["session_id"],
                   command="sleep 300 &")
        assert not await wait_until_gone(mark, timeout=8)
        error = await call_error(c, "terminal_pty_run", session_id=opened["session_id"],
                                 read_only=True)
        assert "unknown or closed" in error


async def test_shutdown_reaps_sessions() -> None:
    mark = new_mark()
    async with make_client() as c:
        opened = await call(c, "terminal_pty_open", env={"TT_TEST_MARK": mark})
        await call(c, "terminal_pty_run", session_id=opened["session_id"],
                   command="sleep 300 &")
    assert not await wait_until_gone(mark, timeout=8)


async def test_session_cap_lists_open_sessions() -> None:
    async with make_client(max_pty_sessions=1) as c:
        first = await call(c, "terminal_pty_open")
        error = await call_error(c, "terminal_pty_open")
        assert "too many PTY sessions" in error and first["session_id"] in error


@pytest.mark.parametrize("arguments,needle", [
    ({"command": "echo 'open"}, "unbalanced"),
    ({"command": "x", "raw_send": "y"}, "one of"),
    ({"expect": "("}, "invalid expect"),
])
async def test_bad_pty_input(session: tuple[Client, str], arguments: dict,
                             needle: str) -> None:
    client, session_id = session
    error = await call_error(client, "terminal_pty_run", session_id=session_id, **arguments)
    assert needle in error
    assert (await run(session, command="echo fine"))["output"] == "fine\n"


async def test_zsh_is_refused_for_pty(client: Client) -> None:
    error = await call_error(client, "terminal_pty_open", shell="/bin/zsh")
    assert "zsh" in error


async def test_unknown_session(client: Client) -> None:
    error = await call_error(client, "terminal_pty_run", session_id="pty_nope", command="true")
    assert "unknown or closed" in error

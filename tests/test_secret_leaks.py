"""Secret values stay masked when a command tries to get them past the masker: split by
escape sequences or control characters that cleaning removes, written in two pieces a
moment apart in a PTY, drawn on the screen with cursor moves, or found by the search
tools in a file or a file name. Transformations (base64, reversal) are out of scope."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastmcp import Client

from .conftest import call, make_client

pytestmark = pytest.mark.anyio

K = "s3cr3t-value-1234567"
LABEL = "[redacted:LEAK_TEST_TOKEN]"


@pytest.fixture
async def masked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("LEAK_TEST_TOKEN", K)
    async with make_client(workdir=str(tmp_path)) as c:
        yield c


SPLITS = [
    r"printf '%s\033[0m%s\n' \"${LEAK_TEST_TOKEN:0:8}\" \"${LEAK_TEST_TOKEN:8}\"",
    r"printf '%s\001%s\n' \"${LEAK_TEST_TOKEN:0:8}\" \"${LEAK_TEST_TOKEN:8}\"",
    r"printf '%s\b%s\n' \"${LEAK_TEST_TOKEN:0:8}\" \"${LEAK_TEST_TOKEN:8}\"",
    r"printf '%s\033]0;title\007%s\n' \"${LEAK_TEST_TOKEN:0:8}\" \"${LEAK_TEST_TOKEN:8}\"",
    r"printf '%s\033[1m\033[31m\033[0m%s\n' \"${LEAK_TEST_TOKEN:0:5}\" \"${LEAK_TEST_TOKEN:5}\"",
]


@pytest.mark.parametrize("command", [s.replace('\\"', '"') for s in SPLITS])
async def test_a_value_split_by_what_cleaning_removes_is_masked(
    masked: Client, command: str
) -> None:
    for raw in (False, True):
        result = await call(masked, "terminal_exec", command=command, raw=raw)
        assert K not in result["stdout"] and LABEL in result["stdout"], result["stdout"]
    job = await call(masked, "terminal_job_start", command=command)
    logs = await call(masked, "terminal_job_logs", job_id=job["job_id"], wait_until_exit=True)
    assert K not in logs["data"] and LABEL in logs["data"]
    session = (await call(masked, "terminal_pty_open"))["session_id"]
    ran = await call(masked, "terminal_pty_run", session_id=session, command=command,
                     screen=True)
    assert K not in ran["output"] and K not in (ran["screen"] or "")
    await call(masked, "terminal_pty_close", session_id=session)


async def test_a_split_value_in_paged_output_is_masked(masked: Client) -> None:
    command = (
        "for i in $(seq 1 400); do printf 'line %s %s\\033[0m%s\\n' $i "
        '"${LEAK_TEST_TOKEN:0:8}" "${LEAK_TEST_TOKEN:8}"; done'
    )
    result = await call(masked, "terminal_exec", command=command, max_output_kb=1)
    page = await call(masked, "terminal_output_get", output_handle=result["output_handle"],
                      max_kb=64)
    assert K not in page["data"] and LABEL in page["data"]


async def test_pty_writes_a_moment_apart_are_masked(masked: Client) -> None:
    session = (await call(masked, "terminal_pty_open"))["session_id"]
    ran = await call(masked, "terminal_pty_run", session_id=session, command=(
        'printf %s "${LEAK_TEST_TOKEN:0:8}"; sleep 0.3; printf "%s\\n" "${LEAK_TEST_TOKEN:8}"'))
    assert K not in ran["output"] and LABEL in ran["output"]
    # Read while the first half is held: it is not released before it is decided.
    await call(masked, "terminal_pty_run", session_id=session, command=(
        'printf %s "${LEAK_TEST_TOKEN:0:8}"; sleep 1; printf "%s\\n" "${LEAK_TEST_TOKEN:8}"'),
        expect="never-zz", timeout_sec=0.5)
    early = await call(masked, "terminal_pty_run", session_id=session, read_only=True,
                       timeout_sec=0.3)
    late = await call(masked, "terminal_pty_run", session_id=session, read_only=True,
                      timeout_sec=2)
    assert K not in early["output"] + late["output"]
    assert K[:8] not in early["output"]
    await call(masked, "terminal_pty_close", session_id=session)


async def test_a_value_drawn_with_cursor_moves_is_masked_on_the_screen(masked: Client) -> None:
    session = (await call(masked, "terminal_pty_open"))["session_id"]
    ran = await call(masked, "terminal_pty_run", session_id=session, screen=True, command=(
        'printf "\\033[9G%s\\r%s\\n" "${LEAK_TEST_TOKEN:8}" "${LEAK_TEST_TOKEN:0:8}"'))
    assert K not in (ran["screen"] or "") and LABEL in (ran["screen"] or "")
    await call(masked, "terminal_pty_close", session_id=session)


async def test_search_results_are_masked(masked: Client, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text(f"the token is {K}\n")
    (tmp_path / f"dump-{K}.log").write_text("needle\n")
    found = await call(masked, "terminal_rg", pattern="token is")
    assert K not in str(found) and LABEL in str(found)
    named = await call(masked, "terminal_rg", pattern="needle")
    assert K not in str(named) and named["matches"]
    globbed = await call(masked, "terminal_glob", pattern="*.log")
    assert K not in str(globbed) and any(LABEL in p for p in globbed["paths"])


async def test_the_screen_does_not_show_the_session_setup(client: Client) -> None:
    session = (await call(client, "terminal_pty_open"))["session_id"]
    ran = await call(client, "terminal_pty_run", session_id=session, command="echo visible",
                     screen=True)
    screen = ran["screen"] or ""
    assert "visible" in screen
    for internal in ("__tt_", "PROMPT_COMMAND", "stty", "bash-"):
        assert internal not in screen, screen
    await call(client, "terminal_pty_close", session_id=session)

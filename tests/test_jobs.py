"""Background jobs through the MCP protocol: promotion, offsets, waits, signals, retention."""

from __future__ import annotations

import hashlib
import time

import pytest
from fastmcp import Client

from .conftest import call, call_error, make_client, new_mark, wait_until_gone

pytestmark = pytest.mark.anyio

TICKER = "for i in $(seq 1 30); do echo tick $i; sleep 0.1; done; echo done >&2; exit 3"


async def read_all(client: Client, job_id: str, stream: str = "stdout",
                   since: int = 0) -> tuple[str, dict]:
    """Follow a job to its end by offset, the way an agent should."""
    pieces = []
    offset = since
    while True:
        page = await call(client, "terminal_job_logs", job_id=job_id, stream=stream,
                          since_offset=offset, wait_until_exit=True, wait_timeout_sec=10)
        pieces.append(page["data"])
        assert page["offset"] == offset and page["truncated_bytes_dropped"] == 0
        offset = page["next_offset"]
        if page["eof"]:
            return "".join(pieces), page


async def test_promotion_continues_without_gap_or_repeat(client: Client) -> None:
    result = await call(client, "terminal_exec", command=TICKER, auto_background_after_sec=1)
    assert result["auto_backgrounded"] is True and result["exit_code"] is None
    assert result["job_id"].startswith("job_")
    assert result["stdout"].startswith("tick 1\n")
    rest, final = await read_all(client, result["job_id"], since=result["stdout_bytes"])
    assert result["stdout"] + rest == "".join(f"tick {i}\n" for i in range(1, 31))
    assert final["status"] == "exited" and final["exit_code"] == 3
    assert final["semantic_status"] == "error"
    stderr, _ = await read_all(client, result["job_id"], stream="stderr")
    assert stderr == "done\n"


async def test_promoted_job_deadline_counts_from_start(client: Client) -> None:
    mark = new_mark()
    started = time.monotonic()
    result = await call(client, "terminal_exec", command="bash -c 'sleep 300 & sleep 300'",
                        auto_background_after_sec=0.5, timeout_sec=3,
                        env={"TT_TEST_MARK": mark})
    assert result["auto_backgrounded"]
    page = await call(client, "terminal_job_logs", job_id=result["job_id"],
                      wait_until_exit=True, wait_timeout_sec=20)
    elapsed = time.monotonic() - started
    assert page["status"] == "exited" and page["end_reason"] == "timeout"
    assert page["timed_out"] is True and page["semantic_status"] == "error"
    assert 2.5 < elapsed < 3 + 4
    assert not await wait_until_gone(mark, timeout=5)


async def test_deadline_before_promotion_kills_inline(client: Client) -> None:
    result = await call(client, "terminal_exec", command="sleep 30", timeout_sec=1,
                        auto_background_after_sec=5)
    assert result["timed_out"] and not result["auto_backgrounded"]


async def test_zero_promotion_budget_means_foreground(client: Client) -> None:
    result = await call(client, "terminal_exec", command="sleep 1.2",
                        auto_background_after_sec=0)
    assert result["auto_backgrounded"] is False and result["exit_code"] == 0


async def test_wait_until_exit_returns_soon_after_exit(client: Client) -> None:
    job = await call(client, "terminal_job_start", command="sleep 0.3")
    started = time.monotonic()
    page = await call(client, "terminal_job_logs", job_id=job["job_id"], wait_until_exit=True)
    assert page["status"] == "exited" and page["exit_code"] == 0 and page["eof"]
    assert time.monotonic() - started < 2.0


async def test_wait_for_returns_at_the_match(client: Client) -> None:
    # Timed from before the start: READY cannot appear sooner than 1 s after it, however
    # long the start call itself takes on a loaded machine.
    started = time.monotonic()
    job = await call(client, "terminal_job_start", command="sleep 1; echo READY; sleep 100",
                     name="server")
    page = await call(client, "terminal_job_logs", job_id="server", wait_for="READY",
                      wait_timeout_sec=20)
    elapsed = time.monotonic() - started
    assert page["matched"] is True and page["match"] == "READY"
    assert "READY" in page["data"] and page["status"] == "running"
    assert 0.95 < elapsed < 10  # at the match, far from the 20 s timeout
    await call(client, "terminal_job_manage", action="signal_kill", job_id=job["job_id"])


async def test_wait_for_gives_up_when_the_job_exits(client: Client) -> None:
    job = await call(client, "terminal_job_start", command="echo nothing")
    page = await call(client, "terminal_job_logs", job_id=job["job_id"], wait_for="NEVER",
                      wait_timeout_sec=20)
    assert page["matched"] is False and page["status"] == "exited"


async def test_unread_output_is_kept_on_disk_byte_exact(client: Client) -> None:
    # ~21 MB nobody reads while it is written: far past the 4 MiB memory window.
    job = await call(client, "terminal_job_start", command="seq 1 2800000")
    first = await call(client, "terminal_job_logs", job_id=job["job_id"],
                       wait_until_exit=True, wait_timeout_sec=40, max_bytes=1)
    assert first["status"] == "exited"
    expected = "".join(f"{i}\n" for i in range(1, 2800001)).encode()
    assert first["total_bytes"] == len(expected) > 20 * 1024 * 1024
    digest = hashlib.sha256()
    offset = 0
    while True:
        page = await call(client, "terminal_job_logs", job_id=job["job_id"],
                          since_offset=offset, max_bytes=4 * 1024 * 1024)
        assert page["truncated_bytes_dropped"] == 0
        digest.update(page["data"].encode())
        offset = page["next_offset"]
        if page["eof"]:
            break
    assert digest.hexdigest() == hashlib.sha256(expected).hexdigest()


async def test_dropped_bytes_are_counted_exactly() -> None:
    async with make_client(job_spool_bytes=1024 * 1024, job_window_bytes=256 * 1024) as c:
        job = await call(c, "terminal_job_start", command="head -c 5242880 /dev/zero")
        await call(c, "terminal_job_logs", job_id=job["job_id"], wait_until_exit=True)
        page = await call(c, "terminal_job_logs", job_id=job["job_id"],
                          since_offset=1024 * 1024, max_bytes=1024)
        window_start = 5242880 - 256 * 1024
        assert page["truncated_bytes_dropped"] == window_start - 1024 * 1024
        assert page["offset"] == window_start
        head = await call(c, "terminal_job_logs", job_id=job["job_id"], since_offset=0,
                          max_bytes=1024)
        assert head["truncated_bytes_dropped"] == 0 and len(head["data"]) == 1024


async def test_signal_term_reaches_the_whole_group(client: Client) -> None:
    mark = new_mark()
    job = await call(client, "terminal_job_start",
                     command="bash -c 'sleep 300 & sleep 300; wait'", env={"TT_TEST_MARK": mark})
    managed = await call(client, "terminal_job_manage", action="signal_term",
                         job_id=job["job_id"])
    assert managed["delivered"] is True and managed["signal"] == "SIGTERM"
    assert managed["ok"] is True
    assert not await wait_until_gone(mark, timeout=5)
    page = await call(client, "terminal_job_logs", job_id=job["job_id"], wait_until_exit=True)
    assert page["status"] == "exited" and page["semantic_status"] == "signal"
    assert page["end_reason"] == "killed"


async def test_stdin_and_close_stdin(client: Client) -> None:
    job = await call(client, "terminal_job_start", command="cat", name="echoer")
    written = await call(client, "terminal_job_manage", action="stdin", job_id="echoer",
                         data="hello job\n")
    assert written["bytes_written"] == 10
    await call(client, "terminal_job_manage", action="close_stdin", job_id="echoer")
    page = await call(client, "terminal_job_logs", job_id=job["job_id"], wait_until_exit=True)
    assert page["data"] == "hello job\n" and page["exit_code"] == 0


async def test_merged_stream(client: Client) -> None:
    job = await call(client, "terminal_job_start", command="echo out; echo err >&2",
                     merge_stderr=True)
    assert job["merged"] is True
    page = await call(client, "terminal_job_logs", job_id=job["job_id"], stream="merged",
                      wait_until_exit=True)
    assert sorted(page["data"].split()) == ["err", "out"]
    error = await call_error(client, "terminal_job_logs", job_id=job["job_id"],
                             stream="stderr")
    assert "merges stderr" in error


async def test_list_and_forget(client: Client) -> None:
    job = await call(client, "terminal_job_start", command="echo listed", name="lister")
    await call(client, "terminal_job_logs", job_id=job["job_id"], wait_until_exit=True)
    listing = await call(client, "terminal_job_manage", action="list")
    entry = next(j for j in listing["jobs"] if j["job_id"] == job["job_id"])
    assert entry["name"] == "lister" and entry["last_line"] == "listed"
    assert entry["status"] == "exited" and entry["stdout_bytes"] == 7
    await call(client, "terminal_job_manage", action="forget", job_id=job["job_id"])
    error = await call_error(client, "terminal_job_logs", job_id=job["job_id"])
    assert "unknown job" in error


async def test_tail_returns_the_end(client: Client) -> None:
    job = await call(client, "terminal_job_start", command="seq 1 10000")
    await call(client, "terminal_job_logs", job_id=job["job_id"], wait_until_exit=True)
    page = await call(client, "terminal_job_logs", job_id=job["job_id"], tail=True,
                      max_bytes=12)
    assert page["data"].endswith("9999\n10000\n") and page["eof"]


async def test_job_cap_refuses_start_and_keeps_promotion_in_foreground() -> None:
    async with make_client(max_jobs=1) as c:
        first = await call(c, "terminal_job_start", command="sleep 30", name="holder")
        error = await call_error(c, "terminal_job_start", command="sleep 30")
        assert "too many jobs" in error and "holder" in error
        result = await call(c, "terminal_exec", command="sleep 1.5",
                            auto_background_after_sec=0.5)
        assert result["auto_backgrounded"] is False and result["exit_code"] == 0
        assert any("job cap" in note for note in result["notes"])
        await call(c, "terminal_job_manage", action="signal_kill", job_id=first["job_id"])


async def test_retention_keeps_the_last_n_exited_jobs() -> None:
    async with make_client(exited_jobs_kept=2) as c:
        ids = []
        for i in range(4):
            job = await call(c, "terminal_job_start", command=f"echo {i}")
            await call(c, "terminal_job_logs", job_id=job["job_id"], wait_until_exit=True)
            ids.append(job["job_id"])
        listing = await call(c, "terminal_job_manage", action="list")
        assert [j["job_id"] for j in listing["jobs"]] == ids[-2:]


@pytest.mark.parametrize("arguments,needle", [
    ({"job_id": "job_nope"}, "unknown job"),
    ({"since_offset": -1}, "since_offset"),
    ({"since_offset": 10**9}, "past the end"),
    ({"max_bytes": 0}, "max_bytes"),
    ({"max_bytes": 10**12}, "max_bytes"),
    ({"stream": "merged"}, "keeps stdout and stderr apart"),
    ({"wait_for": "("}, "invalid wait_for"),
])
async def test_bad_log_reads_are_clear(client: Client, arguments: dict, needle: str) -> None:
    job = await call(client, "terminal_job_start", command="echo x")
    args = {"job_id": job["job_id"], **arguments}
    error = await call_error(client, "terminal_job_logs", **args)
    assert needle in error
    assert (await call(client, "terminal_exec", command="true"))["exit_code"] == 0


async def test_bad_manage_calls_are_clear(client: Client) -> None:
    job = await call(client, "terminal_job_start", command="echo x")
    await call(client, "terminal_job_logs", job_id=job["job_id"], wait_until_exit=True)
    assert "already ended" in await call_error(client, "terminal_job_manage",
                                               action="signal_term", job_id=job["job_id"])
    assert "stdin" in await call_error(client, "terminal_job_manage", action="stdin",
                                       job_id=job["job_id"], data="x")
    assert "needs a job_id" in await call_error(client, "terminal_job_manage",
                                                action="signal_int")
    bad_action = await call_error(client, "terminal_job_manage", action="explode")
    assert bad_action.startswith("invalid argument for terminal_job_manage: action:")
    assert "'signal_term'" in bad_action and "(got 'explode')" in bad_action
    promoted = await call(client, "terminal_exec", command="sleep 3",
                          auto_background_after_sec=0.3)
    error = await call_error(client, "terminal_job_manage", action="stdin",
                             job_id=promoted["job_id"], data="x")
    assert "auto-backgrounded" in error


async def test_wait_cap_is_reported() -> None:
    async with make_client(wait_cap_sec=0.5) as c:
        job = await call(c, "terminal_job_start", command="sleep 5")
        started = time.monotonic()
        page = await call(c, "terminal_job_logs", job_id=job["job_id"], wait_until_exit=True,
                          wait_timeout_sec=30)
        assert time.monotonic() - started < 3
        assert page["status"] == "running" and any("capped" in n for n in page["notes"])
        await call(c, "terminal_job_manage", action="signal_kill", job_id=job["job_id"])


async def test_client_disconnect_ends_jobs() -> None:
    mark = new_mark()
    async with make_client() as c:
        await call(c, "terminal_job_start", command="bash -c 'sleep 300 & sleep 300'",
                   env={"TT_TEST_MARK": mark})
    assert not await wait_until_gone(mark, timeout=8)

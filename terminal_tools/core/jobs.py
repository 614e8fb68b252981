"""Background jobs: long-running commands the agent follows by byte offset.

A job is a :class:`ManagedProcess` plus bookkeeping: id, name, status, retention. The
manager starts jobs, adopts running ``terminal_exec`` commands (auto-promotion, with no
byte lost or repeated: the same buffers simply change owner), answers offset-based and
blocking reads, delivers signals and stdin, and forgets exited jobs after a count and a
TTL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import signal
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

import regex

from ..config import Settings
from ..errors import CapReached, InvalidInput, NotFound
from ..models import EndedJob, EndReason, JobDetail, JobInfo, JobLogs, JobStatus
from . import owners
from .audit import AuditLog
from .buffers import StreamBuffer, decode_page
from .commands import CommandPlan
from .launch import LaunchGate
from .notices import EndNotices, clip_command
from .patterns import compile_pattern
from .processes import Limits, ManagedProcess, ProcessRegistry, SpawnSpec
from .semantics import Verdict, verdict_of_process

log = logging.getLogger(__name__)

Progress = Callable[[float, str], Awaitable[None]]

# What a job-event listener is told: "started", "ended" or "forgotten", and the job.
JobEvent = Literal["started", "ended", "forgotten"]
JobListener = Callable[[JobEvent, "Job"], None]

JOB_NAME_MAX = 63
JOB_NAME = regex.compile(rf"[a-z0-9-]{{1,{JOB_NAME_MAX}}}")

_SCAN_PIECE = 1024 * 1024  # wait_for searches at most this much text at a time

SIGNALS = {
    "signal_int": signal.SIGINT,
    "signal_term": signal.SIGTERM,
    "signal_kill": signal.SIGKILL,
    "signal_hup": signal.SIGHUP,
    "signal_usr1": signal.SIGUSR1,
    "signal_usr2": signal.SIGUSR2,
}


def iso(wall: float | None) -> str | None:
    if wall is None:
        return None
    return datetime.fromtimestamp(wall, UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class JobRequest:
    command: str
    cwd: str | None = None
    env: dict[str, object] | None = None
    shell: bool | str = False
    limits: Limits | None = None
    name: str | None = None
    merge_stderr: bool = False
    timeout_sec: float | None = None


@dataclass
class Job:
    id: str
    name: str | None
    plan: CommandPlan
    process: ManagedProcess
    auto_backgrounded: bool
    timeout_sec: float | None
    ended_wall: float | None = None
    verdict: Verdict | None = None
    end_seen: bool = False  # a reply has shown this job's end to its client
    # The last signal a terminal_job_manage action sent, and whether the job ended while
    # the server was shutting down: both decide end_reason.
    requested_signal: int | None = None
    ended_in_shutdown: bool = False
    scope: str | None = field(default_factory=owners.current)  # who may see it (owners.py)

    @property
    def merged(self) -> bool:
        return self.process.stderr is None

    @property
    def status(self) -> JobStatus:
        # Only two values, so that "poll until status is exited" ends however the job
        # ended; the how is end_reason.
        return "exited" if self.process.done.is_set() else "running"

    @property
    def end_reason(self) -> EndReason | None:
        process = self.process
        if not process.done.is_set():
            return None
        if process.timed_out:
            return "timeout"
        code = process.returncode
        if process.killed_by_request or (
            self.requested_signal is not None and code == -self.requested_signal
        ):
            return "killed"
        if self.ended_in_shutdown:
            return "shutdown"
        if code is not None and code < 0:
            return "signal"
        return "exit"

    @property
    def exit_code(self) -> int | None:
        return self.process.returncode if self.process.done.is_set() else None

    def buffer(self, stream: str) -> StreamBuffer:
        if self.merged:
            if stream == "stderr":
                raise InvalidInput(
                    f"job {self.id} merges stderr into stdout: read stream 'stdout' (or 'merged')"
                )
            return self.process.stdout
        if stream == "merged":
            raise InvalidInput(
                f"job {self.id} keeps stdout and stderr apart (merge_stderr was false): read "
                "'stdout' or 'stderr'"
            )
        if stream == "stderr":
            assert self.process.stderr is not None
            return self.process.stderr
        return self.process.stdout

    def info(self) -> JobInfo:
        process = self.process
        verdict = self.verdict
        return JobInfo(
            job_id=self.id,
            name=self.name,
            command=self.plan.command,
            cwd=self.plan.cwd,
            pid=process.pid,
            status=self.status,
            end_reason=self.end_reason,
            exit_code=self.exit_code,
            semantic_status=verdict.status if verdict else None,
            semantic_message=verdict.message if verdict else None,
            started_at=iso(process.started_wall) or "",
            ended_at=iso(self.ended_wall),
            runtime_ms=process.runtime_ms,
            stdout_bytes=process.stdout.total,
            stderr_bytes=process.stderr_bytes,
            merged=self.merged,
            auto_backgrounded=self.auto_backgrounded,
            timed_out=process.timed_out,
            last_line=_last_line(process),
        )

    def detail(self) -> JobDetail:
        process = self.process
        return JobDetail(
            **self.info().model_dump(),
            stdout_tail=_tail(process.stdout),
            stderr_tail=_tail(process.stderr),
        )


TAIL_BYTES = 4096  # what a job resource shows of each stream


def _tail(buffer: StreamBuffer | None) -> str:
    if buffer is None or buffer.total == 0:
        return ""
    start = max(buffer.first_available, buffer.total - TAIL_BYTES)
    data = buffer.read(start, TAIL_BYTES).data
    # Start on a character boundary: skip UTF-8 continuation bytes the cut left.
    skip = 0
    while skip < min(3, len(data)) and data[skip] & 0xC0 == 0x80:
        skip += 1
    return data[skip:].decode("utf-8", "replace")


def _last_line(process: ManagedProcess) -> str | None:
    for buffer in (process.stdout, process.stderr):
        if buffer is None or buffer.total == 0:
            continue
        tail = buffer.read(max(0, buffer.total - 4096), 4096).data
        lines = [line for line in tail.decode("utf-8", "replace").splitlines() if line.strip()]
        if lines:
            return lines[-1][-300:]
    return None


def _search_piece(pattern: regex.Pattern[str], data: bytes, limit: float) -> str | None:
    """The first match of ``pattern`` in ``data`` (run in a worker thread: the regex module
    releases the GIL while it matches a string)."""
    hit = pattern.search(data.decode("utf-8", "replace"), timeout=limit, concurrent=True)
    return hit.group(0) if hit else None


class JobManager:
    def __init__(
        self,
        registry: ProcessRegistry,
        settings: Settings,
        launch: LaunchGate,
        audit: AuditLog | None = None,
    ) -> None:
        self.registry = registry
        self.settings = settings
        self.launch = launch
        self.audit = audit or AuditLog(None)
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._watchers: set[asyncio.Task[None]] = set()
        self.shutting_down = False
        self.notices = EndNotices()
        self._listeners: list[JobListener] = []

    def add_listener(self, listener: JobListener) -> Callable[[], None]:
        """Call ``listener`` (synchronously, on the event loop) when a job starts, ends
        or is forgotten; returns the function that removes it."""
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    def _emit(self, event: JobEvent, job: Job) -> None:
        for listener in list(self._listeners):
            try:
                listener(event, job)
            except Exception:  # one broken listener must not stop the others
                log.exception("job listener failed on %s %s", event, job.id)

    # -- creation --------------------------------------------------------------------------

    @property
    def running(self) -> list[Job]:
        return [job for job in self._jobs.values() if job.status == "running"]

    def has_room(self) -> bool:
        return len(self.running) < self.settings.max_jobs

    def _cap_message(self) -> str:
        names = ", ".join(
            f"{job.id}{f' ({job.name})' if job.name else ''}: {job.plan.command[:60]}"
            for job in self.running
            if owners.visible(job.scope)
        )
        return (
            f"too many jobs: {self.settings.max_jobs} are running (the max_jobs setting); "
            f"wait for one or stop it with terminal_job_manage. Running: {names}"
        )

    def check_name(self, name: str | None) -> None:
        """A job name is ``[a-z0-9-]``, at most 63 characters, and free: no running job
        the caller can see has it (an ended job's name may be reused; lookups by name
        find the newest job)."""
        if name is None:
            return
        if not JOB_NAME.fullmatch(name):
            raise InvalidInput(
                f"invalid job name {name!r}: use lowercase letters, digits and '-', at most "
                f"{JOB_NAME_MAX} characters (like 'build' or 'dev-server-2')"
            )
        for job in self._visible():
            if job.name == name and job.status == "running":
                raise InvalidInput(
                    f"job name {name!r} is taken by running job {job.id} "
                    f"({job.plan.command[:60]}): wait for it to end, stop it with "
                    "terminal_job_manage, or choose another name"
                )

    async def start(self, request: JobRequest, default_cwd: str) -> Job:
        """Start a background job; the launch gate decides first."""
        self.check_name(request.name)
        plan = await self.launch.command(
            "job_start",
            request.command,
            cwd=request.cwd,
            default_cwd=default_cwd,
            env=request.env,
            shell=request.shell,
            limits=request.limits,
        )
        self.prune()
        if not self.has_room():
            raise CapReached(self._cap_message())
        name, timeout_sec = request.name, request.timeout_sec
        spec = SpawnSpec(
            argv=plan.argv,
            cwd=plan.cwd,
            env=plan.env,
            keep_stdin_open=True,
            merge_stderr=request.merge_stderr,
            limits=plan.limits,
            spool_limit=self.settings.job_spool_bytes,
            redactor=plan.redactor,
        )
        try:
            process = await self.registry.spawn(spec)
        except OSError as exc:
            raise InvalidInput(f"could not start: {exc.strerror or exc}") from None
        process.set_deadline(timeout_sec)
        job = self._register(plan, process, name=name, promoted=False, timeout_sec=timeout_sec)
        self.audit.record(
            "job_start",
            tool="terminal_job_start",
            command=plan.command,
            cwd=plan.cwd,
            shell_kind=plan.shell_kind,
            job_id=job.id,
            name=name,
            pid=process.pid,
            warning=plan.warning,
            blocked=False,
        )
        return job

    def adopt(
        self,
        plan: CommandPlan,
        process: ManagedProcess,
        timeout_sec: float | None,
    ) -> Job | None:
        """Take over a running command; ``None`` when the job cap leaves no room."""
        self.prune()
        if not self.has_room():
            return None
        for buffer in (process.stdout, process.stderr):
            if buffer is not None:
                buffer.raise_spool_limit(self.settings.job_spool_bytes)
        return self._register(plan, process, name=None, promoted=True, timeout_sec=timeout_sec)

    def _register(
        self,
        plan: CommandPlan,
        process: ManagedProcess,
        *,
        name: str | None,
        promoted: bool,
        timeout_sec: float | None,
    ) -> Job:
        job_id = "job_" + secrets.token_hex(4)
        job = Job(job_id, name, plan, process, promoted, timeout_sec)
        self._jobs[job_id] = job
        watcher = asyncio.ensure_future(self._watch(job))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)
        self._emit("started", job)
        return job

    async def _watch(self, job: Job) -> None:
        await job.process.done.wait()
        job.ended_wall = time.time()
        job.ended_in_shutdown = self.shutting_down
        job.verdict = self.verdict(job)
        process = job.process
        self.audit.record(
            "job_exit",
            job_id=job.id,
            command=job.plan.command,
            cwd=job.plan.cwd,
            shell_kind=job.plan.shell_kind,
            exit_code=process.returncode,
            semantic_status=job.verdict.status,
            duration_ms=process.runtime_ms,
            bytes_out=process.output_bytes,
            timed_out=process.timed_out,
            status=job.status,
            end_reason=job.end_reason,
        )
        if not job.end_seen:
            self.notices.add(job.scope, job.id, lambda: self.notice_of(job))
        self._emit("ended", job)
        self.prune()

    # -- notices of ended jobs -----------------------------------------------------------------

    def saw_end(self, job: Job) -> None:
        """A reply to the job's own client showed its end: never announce it."""
        if not job.process.done.is_set() or job.scope != owners.current():
            return
        job.end_seen = True
        self.notices.discard(job.scope, job.id)

    def notice_of(self, job: Job) -> EndedJob:
        process = job.process
        verdict = job.verdict or self.verdict(job)
        kept = self._jobs.get(job.id) is job
        return EndedJob(
            job_id=job.id,
            name=job.name,
            command=clip_command(job.plan.command),
            status="exited",
            end_reason=job.end_reason,
            exit_code=job.exit_code,
            semantic_status=verdict.status,
            semantic_message=verdict.message,
            runtime_ms=process.runtime_ms,
            stdout_bytes=process.stdout.total,
            stderr_bytes=process.stderr.total if process.stderr else 0,
            read_with=f"terminal_job_logs(job_id='{job.id}', tail=true)" if kept else None,
        )

    def take_notices(self) -> list[EndedJob]:
        """The ended-job notices due to the current call's client, once."""
        return self.notices.take(owners.current())

    def verdict(self, job: Job) -> Verdict:
        return verdict_of_process(
            job.process,
            job.plan.analysis,
            shell_kind=job.plan.shell_kind,
            timeout_sec=job.timeout_sec,
        )

    # -- lookup and retention ----------------------------------------------------------------

    def _visible(self) -> list[Job]:
        return [j for j in self._jobs.values() if owners.visible(j.scope)]

    def get(self, key: str) -> Job:
        self.prune()
        job = self._jobs.get(key)
        if job is not None and not owners.visible(job.scope):
            job = None
        if job is None:
            named = [j for j in self._visible() if j.name == key]
            job = named[-1] if named else None
        if job is None:
            known = (
                ", ".join(
                    f"{j.id}{f' ({j.name})' if j.name else ''} [{j.status}]"
                    for j in self._visible()
                )
                or "none"
            )
            raise NotFound(
                f"unknown job {key!r}. Known jobs: {known}. Exited jobs are kept for "
                f"{self.settings.exited_job_ttl_sec:g} s, the last "
                f"{self.settings.exited_jobs_kept} of them."
            )
        return job

    def list(self, *, shows_ends: bool = True) -> list[JobInfo]:
        """The jobs the caller can see. ``shows_ends``: the reply goes to the agent, so
        the ends it shows are seen (a resource read by a client app does not count)."""
        self.prune()
        visible = self._visible()
        if shows_ends:
            for job in visible:
                self.saw_end(job)
        return [job.info() for job in visible]

    def forget(self, job: Job) -> None:
        if job.status == "running":
            raise InvalidInput(
                f"job {job.id} is still running: stop it first (action signal_term or signal_kill)"
            )
        self.saw_end(job)
        self._drop(job)

    def prune(self) -> None:
        """Forget exited jobs past the TTL, then the oldest past the count."""
        now = time.time()
        exited = [j for j in self._jobs.values() if j.ended_wall is not None]
        for job in exited:
            if now - (job.ended_wall or now) > self.settings.exited_job_ttl_sec:
                self._drop(job)
        exited = [j for j in self._jobs.values() if j.ended_wall is not None]
        excess = len(exited) - self.settings.exited_jobs_kept
        for job in exited[: max(0, excess)]:
            self._drop(job)

    def _drop(self, job: Job) -> None:
        if self._jobs.pop(job.id, None) is None:
            return
        job.process.stdout.release()
        if job.process.stderr is not None:
            job.process.stderr.release()
        self._emit("forgotten", job)

    def begin_shutdown(self) -> None:
        """Jobs that end from now on were ended by the server stopping."""
        self.shutting_down = True

    async def shutdown(self) -> None:
        self.shutting_down = True
        for watcher in list(self._watchers):
            watcher.cancel()
        for job in list(self._jobs.values()):
            self._drop(job)

    # -- reading ---------------------------------------------------------------------------

    async def logs(
        self,
        job: Job,
        *,
        stream: str,
        since_offset: int,
        max_bytes: int,
        tail: bool,
        wait_until_exit: bool,
        wait_timeout_sec: float,
        wait_for: str | None,
        progress: Progress | None = None,
    ) -> JobLogs:
        buffer = job.buffer(stream)
        if since_offset < 0:
            raise InvalidInput("since_offset must be >= 0")
        if since_offset > buffer.total and not tail:
            raise InvalidInput(
                f"since_offset {since_offset} is past the end of {stream} ({buffer.total} "
                "bytes so far); continue from next_offset of your last read"
            )
        limit = self.settings.job_logs_max_bytes
        if not 1 <= max_bytes <= limit:
            raise InvalidInput(f"max_bytes must be between 1 and {limit}")
        if wait_timeout_sec < 0:
            raise InvalidInput("wait_timeout_sec must be >= 0")
        waited_for = min(wait_timeout_sec, self.settings.wait_cap_sec)
        notes = []
        if wait_timeout_sec > self.settings.wait_cap_sec and (wait_until_exit or wait_for):
            notes.append(
                f"wait capped at {self.settings.wait_cap_sec:g} s; call again to "
                "keep waiting (the job keeps running)"
            )
        pattern = None
        if wait_for is not None:
            pattern = compile_pattern(wait_for, regex.MULTILINE, what="wait_for regex")
        started = time.monotonic()
        match_text: str | None = None
        matched: bool | None = None
        if pattern is not None:
            match_text, gave_up = await self._wait_for_match(
                job, buffer, since_offset, pattern, waited_for, progress
            )
            matched = match_text is not None
            if gave_up:
                notes.append(gave_up)
            elif not matched and job.status == "running":
                notes.append("wait_for did not match before the wait ended")
        elif wait_until_exit:
            await self._wait_exit(job, waited_for, progress)
        if tail:
            since_offset = max(buffer.first_available, buffer.total - max_bytes)
        chunk = buffer.read(since_offset, max_bytes)
        done = job.process.done.is_set()
        text, used = decode_page(chunk.data, at_eof=done and chunk.end >= buffer.total)
        next_offset = chunk.offset + used
        verdict = job.verdict if done else None
        if done and verdict is None:
            verdict = self.verdict(job)
        if done:
            self.saw_end(job)
        return JobLogs(
            job_id=job.id,
            name=job.name,
            stream=stream,
            data=text,
            offset=chunk.offset,
            next_offset=next_offset,
            eof=done and next_offset >= buffer.total,
            status=job.status,
            end_reason=job.end_reason,
            exit_code=job.exit_code,
            runtime_ms=job.process.runtime_ms,
            truncated_bytes_dropped=chunk.dropped,
            timed_out=job.process.timed_out,
            semantic_status=verdict.status if verdict else None,
            semantic_message=verdict.message if verdict else None,
            total_bytes=buffer.total,
            matched=matched,
            match=match_text,
            waited_ms=int((time.monotonic() - started) * 1000),
            notes=notes,
        )

    async def _wait_exit(self, job: Job, timeout: float, progress: Progress | None) -> None:
        await _with_progress(job.process.done.wait(), timeout, job, progress)

    async def _wait_for_match(
        self,
        job: Job,
        buffer: StreamBuffer,
        since: int,
        pattern: regex.Pattern[str],
        timeout: float,
        progress: Progress | None,
    ) -> tuple[str | None, str | None]:
        """Wait until output after ``since`` matches; searched incrementally from the
        start of the last incomplete line so that matches are not split across chunks.
        Returns the matched text and, when the pattern was too slow to finish, why the
        wait gave up. The matching runs in a worker thread, so a pathological pattern
        costs this call only."""
        found: list[str] = []
        gave_up: list[str] = []
        limit = self.settings.regex_timeout_sec
        scan_from = since

        async def watch() -> None:
            nonlocal scan_from
            while True:
                end = buffer.total
                # Scan what is there in bounded pieces: memory stays small however far
                # the job has run ahead of the reader.
                while end > scan_from:
                    chunk = buffer.read(scan_from, min(end - scan_from, _SCAN_PIECE))
                    if not chunk.data:
                        scan_from = end
                        break
                    try:
                        hit = await asyncio.to_thread(_search_piece, pattern, chunk.data, limit)
                    except TimeoutError:
                        gave_up.append(
                            f"wait_for gave up: the pattern took over {limit:g} s on "
                            f"{len(chunk.data):,} bytes of output; simplify it"
                        )
                        return
                    if hit is not None:
                        found.append(hit)
                        return
                    if chunk.end >= end:
                        # Rescan the unfinished last line when more output arrives.
                        newline = chunk.data.rfind(b"\n")
                        partial = len(chunk.data) - newline - 1 if newline >= 0 else 0
                        scan_from = chunk.end - partial if partial < _SCAN_PIECE // 2 else chunk.end
                        break
                    scan_from = chunk.end
                if job.process.done.is_set() and buffer.total <= end:
                    return
                waiter = asyncio.ensure_future(buffer.wait_beyond(end))
                done_wait = asyncio.ensure_future(job.process.done.wait())
                try:
                    await asyncio.wait({waiter, done_wait}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    waiter.cancel()
                    done_wait.cancel()

        await _with_progress(watch(), timeout, job, progress)
        return (found[0] if found else None), (gave_up[0] if gave_up else None)

    # -- control ---------------------------------------------------------------------------

    async def send_signal(self, job: Job, action: str) -> tuple[bool, bool]:
        """Deliver the signal to the job's group; returns (delivered, exited soon after)."""
        if job.status != "running":
            raise InvalidInput(
                f"job {job.id} has already ended ({job.end_reason}, exit code "
                f"{job.exit_code}); nothing to signal"
            )
        signum = SIGNALS[action]
        job.requested_signal = signum
        if signum == signal.SIGKILL:
            await self.registry.end_tree(job.process, gentle=False)
            delivered = True
        else:
            delivered = job.process.signal_group(signum)
        exited = await job.process.wait_done(self.settings.kill_grace_sec)
        if exited and signum in (signal.SIGTERM, signal.SIGKILL, signal.SIGINT, signal.SIGHUP):
            job.process.killed_by_request = True
        if exited:
            self.saw_end(job)
        self.audit.record(
            "signal",
            tool="terminal_job_manage",
            job_id=job.id,
            signal=signum.name,
            delivered=delivered,
            exited=exited,
        )
        return delivered, exited

    def write_stdin(self, job: Job, data: str) -> int:
        if job.status != "running":
            raise InvalidInput(f"job {job.id} has ended; its stdin is closed")
        payload = data.encode("utf-8")
        try:
            job.process.write_stdin(payload)
        except ProcessLookupError:
            raise InvalidInput(
                f"stdin of job {job.id} is closed"
                + (" (auto-backgrounded commands have no stdin)" if job.auto_backgrounded else "")
            ) from None
        return len(payload)

    def close_stdin(self, job: Job) -> None:
        if not job.process.stdin_open:
            raise InvalidInput(f"stdin of job {job.id} is already closed")
        job.process.close_stdin()


async def _with_progress(
    awaitable: Awaitable[object], timeout: float, job: Job, progress: Progress | None
) -> None:
    """Await ``awaitable`` for at most ``timeout`` s, reporting progress every second."""
    task = asyncio.ensure_future(awaitable)
    deadline = time.monotonic() + timeout
    try:
        while not task.done():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            await asyncio.wait({task}, timeout=min(1.0, remaining))
            if not task.done() and progress is not None:
                elapsed = time.monotonic() - job.process.started
                total = job.process.output_bytes
                with contextlib.suppress(Exception):
                    await progress(
                        elapsed, f"{job.id} running {elapsed:.0f} s, {total} bytes of output"
                    )
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

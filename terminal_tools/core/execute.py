"""``terminal_exec``: run a command, wait for it, and shape the envelope.

The wait has three ways to end: the command finishes (or its deadline kills it), the
promotion budget passes and the running process is handed to the job manager, or the
caller cancels (the tree is killed). Output is captured twice as it arrives: raw into
the process's stream buffers (byte-exact, for ``output_handle`` and job logs) and as
cleaned head+tail text for the inline reply; both see the same bytes in the same order,
so a promoted command's inline text and its byte offsets agree.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..errors import Blocked, InvalidInput, UserError, printable
from ..models import ExecResult
from .audit import elapsed_ms
from .buffers import StreamBuffer
from .commands import CommandPlan
from .inline import InlineCapture, InlineText
from .processes import Limits, ManagedProcess, SpawnSpec, describe_ended
from .runtime import Runtime
from .semantics import Verdict, verdict_of_process

Progress = Callable[[float, str], Awaitable[None]]

_PROGRESS_EVERY_SEC = 1.0


@dataclass(frozen=True)
class ExecRequest:
    command: str
    cwd: str | None = None
    env: dict[str, object] | None = None
    timeout_sec: float | None = None
    auto_background_after_sec: float | None = None
    shell: bool | str = False
    stdin: str | None = None
    max_output_kb: int | None = None
    limits: Limits | None = None
    raw: bool = False


def error_envelope(
    message: str,
    *,
    cwd: str | None = None,
    shell_kind: str | None = None,
    auto_shell: bool = False,
    warning: str | None = None,
    blocked: bool = False,
) -> ExecResult:
    """The envelope for a command that was never started."""
    message = printable(message)
    cwd = printable(cwd) if cwd is not None else None
    return ExecResult(
        exit_code=None,
        stdout="",
        stderr="",
        stdout_truncated_bytes=0,
        stderr_truncated_bytes=0,
        runtime_ms=0,
        pid=None,
        output_handle=None,
        timed_out=False,
        semantic_status="error",
        semantic_message=message,
        warning=warning,
        auto_backgrounded=False,
        job_id=None,
        shell_kind=shell_kind,
        auto_shell=auto_shell,
        error=message,
        blocked=blocked,
        cwd=cwd,
    )


async def execute(
    runtime: Runtime,
    request: ExecRequest,
    default_cwd: str,
    progress: Progress | None = None,
) -> ExecResult:
    settings = runtime.settings
    started = time.monotonic()
    timeout = settings.exec_timeout_sec if request.timeout_sec is None else request.timeout_sec
    promote_after = (
        settings.exec_auto_background_sec
        if request.auto_background_after_sec is None
        else request.auto_background_after_sec
    )
    max_kb = settings.inline_max_kb if request.max_output_kb is None else request.max_output_kb
    try:
        if timeout < 0 or promote_after < 0:
            raise InvalidInput("timeout_sec and auto_background_after_sec must be >= 0")
        if not 1 <= max_kb <= settings.inline_max_kb_limit:
            raise InvalidInput(
                f"max_output_kb must be between 1 and {settings.inline_max_kb_limit}"
            )
        plan = await runtime.launch.command(
            "exec",
            request.command,
            cwd=request.cwd,
            default_cwd=default_cwd,
            env=request.env,
            shell=request.shell,
            limits=request.limits,
            stdin=request.stdin or "",
        )
    except UserError as exc:
        # A command that never started is still answered with the envelope; a policy
        # refusal was audited by the launch gate, other errors are audited here.
        blocked = isinstance(exc, Blocked)
        result = error_envelope(str(exc), cwd=request.cwd, blocked=blocked)
        if not blocked:
            _audit(runtime, request.command, result, started)
        return result
    spec = SpawnSpec(
        argv=plan.argv,
        cwd=plan.cwd,
        env=plan.env,
        stdin=request.stdin.encode("utf-8") if request.stdin is not None else None,
        limits=plan.limits,
        # A finished command's output goes to the store, so it may not exceed it.
        spool_limit=min(settings.job_spool_bytes, settings.store_max_bytes),
        redactor=plan.redactor,
    )
    limit = max_kb * 1024
    captures = {
        "stdout": InlineCapture(limit, clean=not request.raw),
        "stderr": InlineCapture(limit, clean=not request.raw),
    }
    try:
        process = await runtime.registry.spawn(
            spec, listener=lambda stream, data: captures[stream].feed(data)
        )
    except OSError as exc:
        return error_envelope(
            f"could not start {plan.argv[0]}: {exc.strerror or exc}",
            cwd=plan.cwd,
            shell_kind=plan.shell_kind,
            auto_shell=plan.auto_shell,
            warning=plan.warning,
        )
    process.set_deadline(timeout or None)
    try:
        promoted = await _wait(runtime, plan, process, captures, timeout, promote_after, progress)
    except BaseException:
        # Cancelled by the client (or the server is going down): the command dies with
        # the request. The registry owns the task that ends it and frees its buffers.
        process.listener = None
        runtime.registry.track_task(_abandon(runtime, process))
        raise
    result = promoted or _finished(runtime, plan, process, captures, timeout)
    _audit(runtime, request.command, result, started)
    return result


def _audit(runtime: Runtime, command: str, result: ExecResult, started: float) -> None:
    if runtime.audit:
        runtime.audit.record(
            "exec",
            tool="terminal_exec",
            command=command,
            cwd=result.cwd,
            shell_kind=result.shell_kind,
            job_id=result.job_id,
            exit_code=result.exit_code,
            semantic_status=result.semantic_status,
            duration_ms=elapsed_ms(started),
            bytes_out=result.stdout_bytes + result.stderr_bytes,
            blocked=result.blocked,
            warning=result.warning,
            timed_out=result.timed_out,
        )


async def _wait(
    runtime: Runtime,
    plan: CommandPlan,
    process: ManagedProcess,
    captures: dict[str, InlineCapture],
    timeout: float,
    promote_after: float,
    progress: Progress | None,
) -> ExecResult | None:
    """Wait for the end; returns the promoted envelope if the command became a job."""
    promote = promote_after > 0 and (timeout == 0 or promote_after < timeout)
    refused_note = None
    while True:
        elapsed = time.monotonic() - process.started
        wait = _PROGRESS_EVERY_SEC
        if promote and refused_note is None:
            wait = min(wait, max(0.0, promote_after - elapsed))
        if await process.wait_done(wait):
            break
        elapsed = time.monotonic() - process.started
        if promote and refused_note is None and elapsed >= promote_after and process.running:
            job = runtime.jobs.adopt(plan, process, timeout or None)
            if job is not None:
                return _promoted(plan, process, captures, job.id)
            refused_note = (
                f"the job cap ({runtime.settings.max_jobs}) is reached, so this "
                "command stays in the foreground until it ends or times out"
            )
            process.notes.append(refused_note)
        if progress is not None:
            total = process.output_bytes
            with contextlib.suppress(Exception):
                await progress(elapsed, f"running {elapsed:.0f} s, {total} bytes of output")
    return None


def _marker(handle: str | None, stream: str) -> str:
    where = (
        f"terminal_output_get(output_handle='{handle}', stream='{stream}')"
        if handle
        else "the job's log (terminal_job_logs)"
    )
    return f"\n[... {{omitted}} bytes omitted; {where} returns the full output ...]\n"


def _promoted(
    plan: CommandPlan, process: ManagedProcess, captures: dict[str, InlineCapture], job_id: str
) -> ExecResult:
    # The inline snapshot and the byte offsets are taken with no await in between, so
    # the offsets are exactly where the inline text ends: the job log continues there.
    process.listener = None
    texts = {
        name: capture.render(_marker(None, name), partial=True)
        for name, capture in captures.items()
    }
    return _envelope(plan, process, texts, handle=None, job_id=job_id)


def _finished(
    runtime: Runtime,
    plan: CommandPlan,
    process: ManagedProcess,
    captures: dict[str, InlineCapture],
    timeout: float,
) -> ExecResult:
    for capture in captures.values():
        capture.finish()
    cut = tuple(name for name, c in captures.items() if c.total > c.limit or c.looks_binary())
    buffers: dict[str, StreamBuffer] = {"stdout": process.stdout}
    if process.stderr is not None:
        buffers["stderr"] = process.stderr
    handle = runtime.store.put(buffers, cut) if cut else None
    texts = {name: capture.render(_marker(handle, name)) for name, capture in captures.items()}
    result = _envelope(plan, process, texts, handle=handle, job_id=None, timeout=timeout)
    if handle is None:
        for buffer in buffers.values():
            buffer.release()
    return result


def _envelope(
    plan: CommandPlan,
    process: ManagedProcess,
    texts: dict[str, InlineText],
    *,
    handle: str | None,
    job_id: str | None,
    timeout: float = 0,
) -> ExecResult:
    notes = list(process.notes)
    stdout, stderr = texts["stdout"], texts["stderr"]
    for name, text in texts.items():
        if text.looks_binary:
            notes.append(
                f"{name} looks binary ({text.omitted_bytes} bytes): not shown inline; "
                "read it through output_handle"
            )
    dropped = process.stdout.dropped_bytes + (process.stderr.dropped_bytes if process.stderr else 0)
    if dropped:
        notes.append(
            f"{dropped} bytes of output exceeded the retention cap and were not kept "
            "(the inline head and tail are complete); redirect large output to a "
            "file"
        )
    if process.leftovers:
        notes.append(
            f"ended {len(process.leftovers)} process(es) the command left running when it "
            f"exited: {describe_ended(process.leftovers)}. A command's processes end with "
            "it; start long-running services with terminal_job_start"
        )
    if job_id is not None:
        exit_code = None
        verdict = Verdict(
            "ok",
            f"still running as {job_id}: follow it with "
            f"terminal_job_logs(job_id='{job_id}', since_offset="
            f"{process.stdout.total})",
        )
    else:
        exit_code = process.returncode
        if exit_code is None and not process.timed_out:
            exit_code = -1
        verdict = verdict_of_process(
            process, plan.analysis, shell_kind=plan.shell_kind, timeout_sec=timeout
        )
    return ExecResult(
        exit_code=exit_code,
        stdout=stdout.text,
        stderr=stderr.text,
        stdout_truncated_bytes=stdout.omitted_bytes,
        stderr_truncated_bytes=stderr.omitted_bytes,
        runtime_ms=process.runtime_ms,
        pid=process.pid,
        output_handle=handle,
        timed_out=process.timed_out,
        semantic_status=verdict.status,
        semantic_message=verdict.message,
        warning=plan.warning,
        auto_backgrounded=job_id is not None,
        job_id=job_id,
        shell_kind=plan.shell_kind,
        auto_shell=plan.auto_shell,
        cwd=plan.cwd,
        stdout_bytes=process.stdout.total,
        stderr_bytes=process.stderr_bytes,
        output_dropped_bytes=dropped,
        notes=notes,
    )


async def _abandon(runtime: Runtime, process: ManagedProcess) -> None:
    await runtime.registry.end_tree(process)
    await process.wait_done(runtime.settings.kill_grace_sec + 2)
    process.stdout.release()
    if process.stderr is not None:
        process.stderr.release()

"""MCP tasks served by the job manager: a task *is* a job, under an unguessable id.

A client that speaks the tasks extension gets a task instead of waiting on a long
``terminal_exec``; the command runs as an ordinary job (same buffers, deadline,
process tree, retention), and the task's outcome is the envelope ``terminal_exec``
would have returned had it waited. Cancelling the task ends the job's process tree.
This module keeps the id mapping and builds that envelope; the wire format lives in
``tools/tasks.py``.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field

from ..models import ExecResult
from .buffers import StreamBuffer
from .jobs import Job, JobManager


@dataclass
class TaskRecord:
    task_id: str
    job: Job
    created_wall: float = field(default_factory=time.time)
    updated_wall: float = field(default_factory=time.time)
    cancel_requested: bool = False

    @property
    def status(self) -> str:
        """The extension's task status: working, completed or cancelled."""
        if self.job.status == "running":
            return "working"
        if self.cancel_requested and self.job.end_reason == "killed":
            return "cancelled"
        return "completed"


class TaskBook:
    """Task ids and the jobs they are. A task lives as long as its job is kept."""

    def __init__(self, jobs: JobManager) -> None:
        self.jobs = jobs
        self._tasks: dict[str, TaskRecord] = {}
        self._by_job: dict[str, str] = {}

    def create(self, job: Job) -> TaskRecord:
        # The id is a bearer capability (the extension requires enough entropy that
        # nobody can guess another client's task); the job id is not.
        record = TaskRecord("task_" + secrets.token_urlsafe(18), job)
        self._tasks[record.task_id] = record
        self._by_job[job.id] = record.task_id
        # The task reports the job's end; no ended_jobs notice repeats it.
        job.end_seen = True
        return record

    def get(self, task_id: str) -> TaskRecord | None:
        return self._tasks.get(task_id)

    def of_job(self, job: Job) -> TaskRecord | None:
        task_id = self._by_job.get(job.id)
        return self._tasks.get(task_id) if task_id else None

    def forget_job(self, job: Job) -> None:
        task_id = self._by_job.pop(job.id, None)
        if task_id is not None:
            self._tasks.pop(task_id, None)

    async def cancel(self, record: TaskRecord) -> None:
        """End the job's whole process tree (nothing to do once it has ended)."""
        if record.job.status != "running":
            return
        record.cancel_requested = True
        record.updated_wall = time.time()
        await self.jobs.send_signal(record.job, "signal_kill")


def job_envelope(jobs: JobManager, job: Job, max_bytes: int) -> ExecResult:
    """What ``terminal_exec`` returns for a command that ended, built from the job's
    buffers: head and tail of each stream within ``max_bytes``."""
    process = job.process
    verdict = job.verdict or jobs.verdict(job)
    stdout, stdout_cut = _head_and_tail(job, process.stdout, "stdout", max_bytes)
    stderr, stderr_cut = (
        _head_and_tail(job, process.stderr, "stderr", max_bytes) if process.stderr else ("", 0)
    )
    notes = list(process.notes)
    if stdout_cut or stderr_cut:
        notes.append(
            f"the middle of the output was cut; all of it is in terminal_job_logs("
            f"job_id='{job.id}')"
        )
    return ExecResult(
        exit_code=process.returncode,
        stdout=stdout,
        stderr=stderr,
        stdout_truncated_bytes=stdout_cut,
        stderr_truncated_bytes=stderr_cut,
        runtime_ms=process.runtime_ms,
        pid=process.pid,
        output_handle=None,
        timed_out=process.timed_out,
        semantic_status=verdict.status,
        semantic_message=verdict.message,
        warning=job.plan.warning,
        auto_backgrounded=job.auto_backgrounded,
        job_id=job.id,
        shell_kind=job.plan.shell_kind,
        auto_shell=job.plan.auto_shell,
        cwd=job.plan.cwd,
        stdout_bytes=process.stdout.total,
        stderr_bytes=process.stderr.total if process.stderr else 0,
        output_dropped_bytes=process.stdout.dropped_bytes
        + (process.stderr.dropped_bytes if process.stderr else 0),
        notes=notes,
    )


def _head_and_tail(job: Job, buffer: StreamBuffer, stream: str, max_bytes: int) -> tuple[str, int]:
    start, total = buffer.first_available, buffer.total
    if total - start <= max_bytes:
        data = buffer.read(start, max_bytes).data
        return data.decode("utf-8", "replace"), start
    half = max_bytes // 2
    head = buffer.read(start, half).data
    tail_from = total - half
    tail = buffer.read(tail_from, half).data
    omitted = total - len(head) - len(tail)
    marker = (
        f"\n[... {omitted} bytes omitted: terminal_job_logs(job_id='{job.id}', "
        f"stream='{stream}', since_offset={start + len(head)}) ...]\n"
    )
    return (
        head.decode("utf-8", "replace") + marker + tail.decode("utf-8", "replace"),
        omitted,
    )

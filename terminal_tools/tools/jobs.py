"""MCP adapters for the background-job tools."""

from __future__ import annotations

from typing import Annotated, Literal

from fastmcp import Context, FastMCP
from fastmcp.tools import ToolResult
from pydantic import Field

from ..core.jobs import SIGNALS, JobRequest, iso
from ..errors import InvalidInput, UserError
from ..models import JobLogs, JobManaged, JobStarted, Limits
from .context import default_workdir, runtime_of
from .exec import core_limits, progress_reporter
from .replies import reply_to
from .results import output_schema_of, structured_model

ManageAction = Literal[
    "list",
    "signal_int",
    "signal_term",
    "signal_kill",
    "signal_hup",
    "signal_usr1",
    "signal_usr2",
    "stdin",
    "close_stdin",
    "forget",
]


def register(mcp: FastMCP) -> None:
    @mcp.tool(
        tags={"advanced"},
        title="Start a background job",
        annotations={
            "readOnlyHint": False,
            "destructiveHint": True,
            "idempotentHint": False,
            "openWorldHint": True,
        },
    )
    async def terminal_job_start(
        command: Annotated[
            str, Field(description=("The command line (same routing as terminal_exec)."))
        ],
        ctx: Context,
        cwd: Annotated[str | None, Field(description="Working directory.")] = None,
        env: Annotated[
            dict[str, str] | None, Field(description=("Extra environment variables."))
        ] = None,
        merge_stderr: Annotated[
            bool,
            Field(
                description=("Send stderr into stdout (one interleaved stream, read as 'stdout').")
            ),
        ] = False,
        shell: Annotated[
            bool | str, Field(description=("true or a shell name/path, as in terminal_exec."))
        ] = False,
        name: Annotated[
            str | None,
            Field(
                description=(
                    "A name to use instead of the job_id anywhere one is taken (lowercase "
                    "letters, digits and '-', at most 63 characters). Reusable once the job "
                    "that had it has ended."
                ),
            ),
        ] = None,
        limits: Annotated[Limits | None, Field(description="Resource limits.")] = None,
        timeout_sec: Annotated[
            float,
            Field(
                ge=0,
                description=(
                    "Deadline from start after which the job's process tree is killed; 0 = none."
                ),
            ),
        ] = 0,
    ) -> JobStarted:
        """Start a command in the background and return at once with its job_id.

        Its stdin stays open for terminal_job_manage(action='stdin'). Follow the output
        with terminal_job_logs (offsets, wait_until_exit, wait_for).
        """
        runtime = runtime_of(ctx)
        request = JobRequest(
            command=command,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            shell=shell,
            limits=core_limits(limits),
            name=name,
            merge_stderr=merge_stderr,
            timeout_sec=timeout_sec or None,
        )
        try:
            job = await runtime.jobs.start(request, await default_workdir(ctx))
        except UserError as exc:
            return reply_to(exc, lambda reason: JobStarted.refused(reason, name=name, cwd=cwd))
        plan = job.plan
        return JobStarted(
            job_id=job.id,
            pid=job.process.pid,
            name=job.name,
            started_at=iso(job.process.started_wall) or "",
            merged=job.merged,
            argv=plan.argv,
            shell_kind=plan.shell_kind,
            auto_shell=plan.auto_shell,
            cwd=plan.cwd,
            warning=plan.warning,
            timeout_sec=timeout_sec or None,
        )

    @mcp.tool(
        tags={"basic"},
        title="Read job output",
        output_schema=output_schema_of(JobLogs),
        annotations={
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    )
    async def terminal_job_logs(
        job_id: Annotated[str, Field(description="The job's id or name.")],
        ctx: Context,
        stream: Annotated[
            Literal["stdout", "stderr", "merged"],
            Field(description=("Which stream; 'merged' for jobs started with merge_stderr.")),
        ] = "stdout",
        since_offset: Annotated[
            int,
            Field(
                description=(
                    "Absolute byte offset to read from: 0, or next_offset of the previous read."
                )
            ),
        ] = 0,
        max_bytes: Annotated[
            int | None,
            Field(
                description=(
                    "Most bytes to return. Default: the job_logs_default_bytes setting (65536)."
                )
            ),
        ] = None,
        tail: Annotated[
            bool,
            Field(description=("Return the last max_bytes instead of reading from since_offset.")),
        ] = False,
        wait_until_exit: Annotated[
            bool,
            Field(
                description=("Block until the job exits (or the wait times out) before reading.")
            ),
        ] = False,
        wait_timeout_sec: Annotated[
            float, Field(description=("Longest wait; capped at 45 s by the wait_cap_sec setting."))
        ] = 30,
        wait_for: Annotated[
            str | None,
            Field(
                description=(
                    "Regex: block until output after since_offset matches it, the job exits, or "
                    "the wait times out."
                )
            ),
        ] = None,
    ) -> ToolResult:
        """Read a job's output by absolute byte offset, optionally waiting server-side.

        Keep next_offset and pass it back as since_offset: nothing is repeated or
        skipped. truncated_bytes_dropped > 0 means you fell behind the retention caps.
        """
        runtime = runtime_of(ctx)
        try:
            job = runtime.jobs.get(job_id)
            logs = await runtime.jobs.logs(
                job,
                stream=stream,
                since_offset=since_offset,
                max_bytes=max_bytes
                if max_bytes is not None
                else runtime.settings.job_logs_default_bytes,
                tail=tail,
                wait_until_exit=wait_until_exit,
                wait_timeout_sec=wait_timeout_sec,
                wait_for=wait_for,
                progress=progress_reporter(ctx),
            )
        except UserError as exc:
            reply_to(exc)
        # A page can hold megabytes: serialize it once (see results.py).
        return structured_model(logs)

    @mcp.tool(
        tags={"basic"},
        title="Manage background jobs",
        annotations={
            "readOnlyHint": False,
            "destructiveHint": True,
            "idempotentHint": False,
            "openWorldHint": False,
        },
    )
    async def terminal_job_manage(
        action: Annotated[
            ManageAction,
            Field(
                description=(
                    "list | signal_int | signal_term | signal_kill | signal_hup | signal_usr1 | "
                    "signal_usr2 | stdin | close_stdin | forget"
                )
            ),
        ],
        ctx: Context,
        job_id: Annotated[
            str | None, Field(description=("The job's id or name (every action but list)."))
        ] = None,
        data: Annotated[
            str | None,
            Field(
                description=("Text for action='stdin' (add a newline if the program reads lines).")
            ),
        ] = None,
    ) -> JobManaged:
        """List jobs, signal a job's whole process group, write to its stdin, or forget it.

        Signals go to every process of the job. After signal_term, check `exited`; if it
        is false, escalate to signal_kill.
        """
        runtime = runtime_of(ctx)
        jobs = runtime.jobs
        try:
            if action == "list":
                listed = jobs.list()
                return JobManaged(
                    action=action, ok=True, jobs=listed, message=f"{len(listed)} job(s)"
                )
            if not job_id:
                raise InvalidInput(f"action {action} needs a job_id")
            job = jobs.get(job_id)
            if action in SIGNALS:
                delivered, exited = await jobs.send_signal(job, action)
                return JobManaged(
                    action=action,
                    job_id=job.id,
                    delivered=delivered,
                    signal=SIGNALS[action].name,
                    ok=delivered,
                    status=job.status,
                    end_reason=job.end_reason,
                    exit_code=job.exit_code,
                    exited=exited,
                    message=None
                    if exited
                    else ("delivered; the job is still running. Wait, or escalate to signal_kill"),
                )
            if action == "stdin":
                if data is None:
                    raise InvalidInput("action stdin needs `data`")
                written = jobs.write_stdin(job, data)
                return JobManaged(
                    action=action,
                    ok=True,
                    job_id=job.id,
                    bytes_written=written,
                    status=job.status,
                    end_reason=job.end_reason,
                )
            if action == "close_stdin":
                jobs.close_stdin(job)
                return JobManaged(
                    action=action,
                    ok=True,
                    job_id=job.id,
                    status=job.status,
                    end_reason=job.end_reason,
                )
            if action == "forget":
                jobs.forget(job)
                return JobManaged(
                    action=action,
                    ok=True,
                    job_id=job.id,
                    status=job.status,
                    end_reason=job.end_reason,
                    message="forgotten; its output is gone",
                )
            raise InvalidInput(f"unknown action {action!r}")  # pragma: no cover - Literal
        except UserError as exc:
            reply_to(exc)

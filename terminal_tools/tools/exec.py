"""MCP adapters for ``terminal_exec`` and ``terminal_output_get``."""

from __future__ import annotations

from typing import Annotated, Literal

from fastmcp import Context, FastMCP
from fastmcp.tools import ToolResult
from pydantic import Field

from ..core.execute import ExecRequest, execute
from ..core.paging import read_output
from ..core.processes import Limits as CoreLimits
from ..errors import UserError
from ..models import ExecResult, Limits, OutputPage
from .context import default_workdir, runtime_of
from .replies import reply_to
from .results import output_schema_of, structured_model


def core_limits(limits: Limits | None) -> CoreLimits | None:
    if limits is None:
        return None
    return CoreLimits(**limits.model_dump())


def progress_reporter(ctx: Context):
    async def report(elapsed: float, message: str) -> None:
        await ctx.report_progress(elapsed, None, message)

    return report


def register(mcp: FastMCP) -> None:
    @mcp.tool(
        tags={"basic"},
        title="Run a command",
        output_schema=output_schema_of(ExecResult),
        annotations={
            "readOnlyHint": False,
            "destructiveHint": True,
            "idempotentHint": False,
            "openWorldHint": True,
        },
    )
    async def terminal_exec(
        command: Annotated[
            str,
            Field(
                description=(
                    "The command line. Plain `program args` runs directly; pipes, redirections, "
                    "expansions, globs, lists and builtins are detected and run with bash "
                    "(auto_shell)."
                )
            ),
        ],
        ctx: Context,
        cwd: Annotated[
            str | None,
            Field(
                description=(
                    "Working directory; relative paths resolve against the default working "
                    "directory (--workdir, else the client's first root, else the server's cwd)."
                )
            ),
        ] = None,
        env: Annotated[
            dict[str, str] | None,
            Field(
                description=(
                    "Extra environment variables (string values), merged over the server's."
                )
            ),
        ] = None,
        timeout_sec: Annotated[
            float | None,
            Field(
                ge=0,
                description=(
                    "Deadline in seconds from the command's start, also after it becomes a job; "
                    "the whole process tree is killed when it passes. 0 = no limit. Default: the "
                    "exec_timeout_sec setting (60)."
                ),
            ),
        ] = None,
        auto_background_after_sec: Annotated[
            float | None,
            Field(
                ge=0,
                description=(
                    "Wait this long, then turn a still-running command into a background job and "
                    "return its job_id. 0 = never (pure foreground). Default: the "
                    "exec_auto_background_sec setting (30)."
                ),
            ),
        ] = None,
        shell: Annotated[
            bool | str,
            Field(
                description=(
                    "true: always run through the default shell; a path or name (bash, sh, dash, "
                    "pwsh, powershell, cmd): run through that shell. zsh is refused."
                )
            ),
        ] = False,
        stdin: Annotated[
            str | None,
            Field(
                description=("Text written to the command's standard input (default: empty input).")
            ),
        ] = None,
        max_output_kb: Annotated[
            int | None,
            Field(
                description=(
                    "Inline text per stream in KiB before the middle is cut (head and tail kept). "
                    "Default: the inline_max_kb setting (256)."
                )
            ),
        ] = None,
        limits: Annotated[Limits | None, Field(description="Resource limits.")] = None,
        raw: Annotated[
            bool,
            Field(
                description=(
                    "Return output as written: keep escape sequences and carriage-return redraws."
                )
            ),
        ] = False,
    ) -> ToolResult:
        """Run a command and wait for its result.

        Read semantic_status first: grep exiting 1 is "ok: No matches found". Output that
        does not fit inline keeps its head and tail; the full streams stay available
        through output_handle. A command still running after auto_background_after_sec
        becomes a background job: the result then has auto_backgrounded=true and a
        job_id to follow with terminal_job_logs.
        """
        runtime = runtime_of(ctx)
        request = ExecRequest(
            command=command,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            timeout_sec=timeout_sec,
            auto_background_after_sec=auto_background_after_sec,
            shell=shell,
            stdin=stdin,
            max_output_kb=max_output_kb,
            limits=core_limits(limits),
            raw=raw,
        )
        result = await execute(runtime, request, await default_workdir(ctx), progress_reporter(ctx))
        # Inline output can reach megabytes: serialize it once (see results.py).
        return structured_model(result)

    @mcp.tool(
        tags={"basic"},
        title="Read stored output",
        output_schema=output_schema_of(OutputPage),
        annotations={
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    )
    async def terminal_output_get(
        output_handle: Annotated[str, Field(description="Handle from a terminal_exec result.")],
        ctx: Context,
        since_offset: Annotated[
            int, Field(description=("Byte offset to read from; pass the previous next_offset."))
        ] = 0,
        max_kb: Annotated[int, Field(ge=1, le=8192, description="Page size in KiB.")] = 64,
        stream: Annotated[
            Literal["stdout", "stderr"] | None,
            Field(
                description=(
                    "Which stream of the command to read. Default: the one that did not fit "
                    "inline (stdout when both did not)."
                )
            ),
        ] = None,
        pattern: Annotated[
            str | None,
            Field(
                description=(
                    "Regex: instead of a page, return matching lines (with line numbers) from "
                    "since_offset on."
                )
            ),
        ] = None,
        context: Annotated[
            int,
            Field(
                ge=0,
                le=50,
                description=("With pattern: lines of context before and after each match."),
            ),
        ] = 0,
    ) -> ToolResult:
        """Page through the complete output of a command whose output did not fit inline.

        Pages never split a UTF-8 character. With `pattern`, search the stored stream
        instead of paging it. Handles expire 300 s after their last use (see expired).
        """
        runtime = runtime_of(ctx)
        entry = runtime.store.get(output_handle)
        chosen = stream or (entry.default_stream() if entry else "stdout")
        try:
            page = await read_output(
                runtime.store,
                output_handle,
                stream=chosen,
                since_offset=since_offset,
                max_kb=max_kb,
                pattern=pattern,
                context=context,
                search_time_limit=runtime.settings.output_search_timeout_sec,
            )
        except UserError as exc:
            reply_to(exc)
        if entry is not None:
            other = entry.streams.get("stderr" if chosen == "stdout" else "stdout")
            page.other_stream_bytes = other.total if other is not None else 0
        return structured_model(page)

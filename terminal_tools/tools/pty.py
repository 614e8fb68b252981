"""MCP adapters for the PTY tools (POSIX only; not registered on Windows)."""

from __future__ import annotations

from typing import Annotated

from fastmcp import Context, FastMCP
from pydantic import Field

from ..core.inline import InlineCapture
from ..core.pty import PtyManager, PtyRequest, PtySession, RunOutcome
from ..errors import InvalidInput, NotFound, UserError
from ..models import PtyClosed, PtyOpened, PtyRunResult
from .context import default_workdir, runtime_of
from .replies import reply_to

INTERACTIVE = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}


def _manager(ctx: Context) -> PtyManager:
    return runtime_of(ctx).ptys


def _result(
    session: PtySession,
    outcome: RunOutcome,
    *,
    max_bytes: int,
    screen: tuple[str, tuple[int, int]] | None = None,
) -> PtyRunResult:
    capture = InlineCapture(max_bytes, clean=False)
    capture.feed(outcome.output.encode("utf-8"))
    capture.finish()
    inline = capture.render("\n[... {omitted} bytes omitted ...]\n")
    rendered, cursor = screen if screen else (None, None)
    verdict = outcome.verdict
    running = session.pending is not None
    if outcome.blocked:
        error = outcome.message
    elif outcome.busy:
        error = f"session busy: {outcome.message}"
    else:
        error = None
    return PtyRunResult(
        session_id=session.id,
        output=inline.text,
        output_truncated_bytes=inline.omitted_bytes,
        exit_code=outcome.exit_code,
        semantic_status=verdict.status if verdict else None,
        semantic_message=verdict.message if verdict else None,
        cwd=session.cwd,
        timed_out=outcome.timed_out,
        running=running,
        prompt_after=not running,
        bytes_sent=outcome.bytes_sent,
        busy=outcome.busy,
        blocked=outcome.blocked,
        error=error,
        more=outcome.more,
        matched=outcome.matched,
        match=outcome.match,
        screen=rendered,
        cursor=list(cursor) if cursor else None,
        cols=session.cols,
        rows=session.rows,
        next_offset=outcome.next_offset,
        warning=outcome.warning,
        message=outcome.message,
    )


def register(mcp: FastMCP) -> None:
    @mcp.tool(tags={"advanced"}, title="Open a PTY session", annotations=INTERACTIVE)
    async def terminal_pty_open(
        ctx: Context,
        cwd: Annotated[str | None, Field(description="Starting directory.")] = None,
        env: Annotated[
            dict[str, str] | None, Field(description=("Extra environment variables."))
        ] = None,
        cols: Annotated[int, Field(ge=10, le=1000, description="Terminal width.")] = 120,
        rows: Annotated[int, Field(ge=5, le=500, description="Terminal height.")] = 40,
        idle_timeout_sec: Annotated[
            float | None,
            Field(
                ge=0,
                description=(
                    "Close the session after this long unused; 0 = never. Default: the "
                    "pty_idle_timeout_sec setting (1800)."
                ),
            ),
        ] = None,
        shell: Annotated[
            str | None,
            Field(description=("Path of a bash to use (zsh and other shells are refused).")),
        ] = None,
    ) -> PtyOpened:
        """Open a persistent interactive bash in a pseudo-terminal.

        State (cwd, variables, running programs) persists between terminal_pty_run
        calls. Use it for REPLs, prompts (sudo, ssh), TUIs and anything that needs a tty.
        """
        runtime = runtime_of(ctx)
        try:
            session = await runtime.ptys.open(
                cwd=cwd,
                default_cwd=await default_workdir(ctx),
                env=env,
                cols=cols,
                rows=rows,
                shell=shell,
                idle_timeout=runtime.settings.pty_idle_timeout_sec
                if idle_timeout_sec is None
                else idle_timeout_sec,
            )
        except UserError as exc:
            return reply_to(
                exc, lambda reason: PtyOpened.refused(reason, cwd=cwd, cols=cols, rows=rows)
            )
        return PtyOpened(
            session_id=session.id,
            pid=session.process.pid,
            shell=session.shell,
            cwd=session.cwd,
            cols=cols,
            rows=rows,
            idle_timeout_sec=session.idle_timeout,
        )

    @mcp.tool(tags={"advanced"}, title="Use a PTY session", annotations=INTERACTIVE)
    async def terminal_pty_run(
        session_id: Annotated[str, Field(description="From terminal_pty_open.")],
        ctx: Context,
        command: Annotated[
            str | None,
            Field(
                description=(
                    "A shell command: runs and waits for the prompt (exit_code, cwd). With "
                    "expect, the line is sent (to the shell, or to the program running in it) and "
                    "the call waits for the expect pattern instead."
                )
            ),
        ] = None,
        expect: Annotated[
            str | None,
            Field(description=("Regex to wait for in the output, e.g. '>>> ' or '[Pp]assword:'.")),
        ] = None,
        raw_send: Annotated[
            bool | str | None,
            Field(
                description=(
                    "true: type `command` exactly as given (add \\n yourself) and return "
                    "without waiting (unless expect is given). A string: text to type instead, "
                    "with named keys: {Enter} {Tab} {Esc} {Backspace} {Up} {Down} {Left} {Right} "
                    "{Home} {End} {PageUp} {PageDown} {Delete} {Ctrl-C} {Ctrl-D} {Ctrl-Z} "
                    "{Ctrl-L} (any {Ctrl-letter})."
                )
            ),
        ] = None,
        read_only: Annotated[
            bool, Field(description=("Return the output since the last read once it settles."))
        ] = False,
        screen: Annotated[
            bool,
            Field(
                description=(
                    "Also return the rendered screen (rows x cols) as a terminal would show it."
                )
            ),
        ] = False,
        timeout_sec: Annotated[
            float | None,
            Field(
                ge=0,
                description=(
                    "Longest wait for the command or expect. Default: the pty_run_timeout_sec "
                    "setting (30)."
                ),
            ),
        ] = None,
        raw: Annotated[
            bool, Field(description=("Keep escape sequences and \\r redraws in output."))
        ] = False,
        cols: Annotated[
            int | None,
            Field(
                ge=10,
                le=1000,
                description=("Resize the terminal first (the program gets SIGWINCH)."),
            ),
        ] = None,
        rows: Annotated[int | None, Field(ge=5, le=500, description="Resize: height.")] = None,
    ) -> PtyRunResult:
        """Run a command in a PTY session, talk to the program running in it, or read it.

        Modes: command (wait for the prompt), command or raw_send plus expect (wait for a
        pattern), raw_send alone or command with raw_send=true (type and return),
        read_only (drain), screen (render). One command at a time: a second command
        while one runs returns busy=true and error 'session busy: ...'.
        """
        runtime = runtime_of(ctx)
        manager = runtime.ptys
        settings = runtime.settings
        # raw_send=true is the reference's spelling: `command` is the text, typed verbatim.
        verbatim = raw_send is True
        if isinstance(raw_send, bool):
            if verbatim and command is None:
                reply_to(InvalidInput("raw_send=true types `command`: give the text in command"))
            typed, command = (command, None) if verbatim else (None, command)
        else:
            typed = raw_send
        request = PtyRequest(
            command=command,
            raw_send=typed,
            verbatim=verbatim,
            expect=expect,
            read_only=read_only,
            timeout=settings.pty_run_timeout_sec if timeout_sec is None else timeout_sec,
            raw=raw,
            regex_timeout=settings.regex_timeout_sec,
        )
        max_bytes = settings.inline_max_kb * 1024
        try:
            session = manager.get(session_id)
            if cols is not None or rows is not None:
                session.resize(cols or session.cols, rows or session.rows)
            outcome = await manager.interact(session, request)
        except UserError as exc:
            return reply_to(
                exc,
                lambda reason: _result(
                    session,
                    RunOutcome(
                        output="", blocked=True, message=reason, next_offset=session.read_offset
                    ),
                    max_bytes=max_bytes,
                ),
            )
        rendered = await session.render_screen() if screen else None
        return _result(session, outcome, screen=rendered, max_bytes=max_bytes)

    @mcp.tool(tags={"advanced"}, title="Close a PTY session", annotations=INTERACTIVE)
    async def terminal_pty_close(
        session_id: Annotated[str, Field(description="The session to close.")],
        ctx: Context,
        force: Annotated[
            bool, Field(description=("Skip the polite `exit` and end the process tree at once."))
        ] = False,
    ) -> PtyClosed:
        """Close a PTY session: `exit`, then end every process it started."""
        manager = _manager(ctx)
        session = manager.find(session_id)
        if session is None:
            reply_to(NotFound(f"unknown or already closed PTY session {session_id!r}"))
        output, code = await manager.close(session, force=force)
        return PtyClosed(
            session_id=session_id,
            output=output,
            exit_code=code,
            message="closed; no process of the session is left",
        )

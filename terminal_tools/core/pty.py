"""PTY sessions: a persistent interactive bash in a pseudo-terminal.

The shell runs ``bash --norc --noprofile --noediting -i`` in its own session with the PTY
as its controlling terminal. Terminal echo is turned off and the prompts are empty, so
what the shell writes after a command is exactly that command's output. The end of each
command is detected by a marker the shell prints from ``PROMPT_COMMAND``::

    ESC ] 7770 ; <session secret>:<prompt number> ; <exit status> ; <$PWD> BEL

The secret is random per session and the prompt number grows by one per prompt, so every
marker carries a token that no earlier output (a log being ``cat``-ed, ``echo "$PS1"``)
can contain; markers are removed from everything returned. Everything the PTY prints is
kept in a :class:`StreamBuffer` (offsets, like job logs) and fed to a terminal emulator
(pyte) for the rendered screen.

POSIX only: Windows has no PTY of this kind (ConPTY is not supported here).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import os
import re
import secrets
import struct
import termios
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import psutil
import pyte
import regex

if TYPE_CHECKING:
    from ..config import Settings
    from .audit import AuditLog
    from .launch import LaunchGate
    from .processes import ProcessRegistry

from ..errors import CapReached, InvalidInput, NotFound
from . import owners
from .analysis import Analysis, analyze, innermost, is_shell, unbalanced_quote
from .audit import elapsed_ms
from .buffers import StreamBuffer
from .destructive import destructive_warning
from .noise import clean
from .patterns import compile_pattern
from .processes import ManagedProcess, SpawnSpec
from .redact import StreamMasker
from .semantics import Verdict, classify_exit

_MARKER = re.compile(rb"\x1b\]7770;([0-9a-f]+):(\d+);(-?\d+);([^\x07]*)\x07")
_MARKER_MAX = 4096  # a marker (with $PWD) is never longer than this
_READ_SIZE = 65536
_SCREEN_REPLAY_BYTES = 64 * 1024
_SCREEN_RENDER_BUDGET_SEC = 1.0
_SCREEN_SLICE_BYTES = 256
_SETTLE_SEC = 0.3  # read_only: output is "settled" after this long without new bytes
_READ_ONLY_MAX_SEC = 2.0
# Programs that read typed lines as commands (input to them is checked by the policy).
_SHELL_NAMES = frozenset({"bash", "sh", "dash", "zsh", "ksh", "fish", "ssh", "su", "sudo"})

# Named keys for raw_send, written as {Name} (case-insensitive).
KEYS: dict[str, str] = {
    "enter": "\r",
    "return": "\r",
    "tab": "\t",
    "esc": "\x1b",
    "escape": "\x1b",
    "backspace": "\x7f",
    "space": " ",
    "up": "\x1b[A",
    "down": "\x1b[B",
    "right": "\x1b[C",
    "left": "\x1b[D",
    "home": "\x1b[H",
    "end": "\x1b[F",
    "pageup": "\x1b[5~",
    "pagedown": "\x1b[6~",
    "delete": "\x1b[3~",
    **{f"ctrl-{c}": chr(ord(c) - ord("a") + 1) for c in "abcdefghijklmnopqrstuvwxyz"},
    "ctrl-[": "\x1b",
    "ctrl-\\": "\x1c",
    "ctrl-]": "\x1d",
}
_KEY = re.compile(r"\{([A-Za-z]+(?:-[A-Za-z\[\]\\])?)\}")


def encode_keys(text: str) -> str:
    """Replace ``{Enter}``, ``{Ctrl-C}``, ... by their bytes; unknown ``{...}`` stay."""
    return _KEY.sub(lambda m: KEYS.get(m.group(1).lower(), m.group(0)), text)


@dataclass
class Marker:
    seq: int
    status: int
    cwd: str
    start: int
    end: int


class SessionBusy(InvalidInput):
    """A command is already running in the session."""


@dataclass
class Pending:
    """A command sent with ``run`` whose prompt marker has not arrived yet."""

    command: str
    expect_seq: int
    start: int
    started: float
    analysis: Analysis | None = None
    warning: str | None = None  # destructive-command and policy warnings, for the result
    done: asyncio.Future[Marker] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


@dataclass(frozen=True)
class PtyRequest:
    """One terminal_pty_run call: exactly one of command, raw_send, read_only (or an
    expect alone), plus how long to wait."""

    command: str | None = None
    raw_send: str | None = None
    # raw_send is typed exactly as given ({Enter} and the like stay text).
    verbatim: bool = False
    expect: str | None = None
    read_only: bool = False
    timeout: float = 30.0
    raw: bool = False
    regex_timeout: float = 1.0


@dataclass
class RunOutcome:
    output: str
    exit_code: int | None = None
    verdict: Verdict | None = None
    timed_out: bool = False
    busy: bool = False
    blocked: bool = False
    running: bool = False
    more: bool = False
    matched: bool | None = None
    match: str | None = None
    screen: str | None = None
    cursor: tuple[int, int] | None = None
    warning: str | None = None
    message: str | None = None
    next_offset: int = 0
    dropped: int = 0
    bytes_sent: int | None = None  # raw_send: bytes written to the terminal


class PtySession:
    def __init__(
        self,
        manager: PtyManager,
        session_id: str,
        master: int,
        process: ManagedProcess,
        shell: str,
        cols: int,
        rows: int,
        idle_timeout: float,
    ) -> None:
        self.manager = manager
        self.id = session_id
        self.scope = owners.current()  # who may see it (owners.py)
        self.master = master
        self.process = process
        self.shell = shell
        self.cols = cols
        self.rows = rows
        self.idle_timeout = idle_timeout
        self.secret = secrets.token_hex(8)
        self.buffer = StreamBuffer(
            manager.settings.job_window_bytes,
            manager.settings.job_spool_bytes,
            manager.registry.budget,
        )
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self._screen_fed = 0  # offset up to which the emulator has seen the output
        self._screen_stale = False  # the last render ran out of time: start afresh
        self._screen_lock = threading.Lock()  # the emulator is fed in worker threads
        self._render_order = asyncio.Lock()  # ... one render at a time, in offset order
        self.markers: list[Marker] = []
        self.last_seq = 0
        self.cwd = ""
        self.read_offset = 0
        self.pending: Pending | None = None
        self.commands: dict[int, str] = {}  # prompt number -> command that ended there
        self.last_used = time.monotonic()
        self.closed = False
        self._scan_from = 0
        self._idle_timer: asyncio.TimerHandle | None = None
        self._write_queue = bytearray()
        self.masker: StreamMasker | None = None
        self.tty_path: str | None = None

    # -- I/O -----------------------------------------------------------------------------

    def _on_readable(self) -> None:
        try:
            data = os.read(self.master, _READ_SIZE)
        except BlockingIOError:
            return
        except OSError:  # EIO: the slave side is closed (the shell has exited)
            data = b""
        if not data:
            self._stop_reading()
            self._take(self.masker.flush() if self.masker else b"")
            self.buffer.close()
            return
        if self.masker is not None:
            # A possible start of a secret is held until the bytes that decide it arrive
            # (releasing it on a timer let a value written in two pieces through); a
            # prompt marker decides everything before it.
            data = self.masker.feed(data)
        self._take(data)

    def _take(self, data: bytes) -> None:
        if not data:
            return
        self.buffer.append(data)
        self._scan_markers()

    def _stop_reading(self) -> None:
        with contextlib.suppress(Exception):
            asyncio.get_running_loop().remove_reader(self.master)

    def _scan_markers(self) -> None:
        start = max(self._scan_from, self.buffer.first_available)
        chunk = self.buffer.read(start, self.buffer.total - start)
        last_end = None
        for found in _MARKER.finditer(chunk.data):
            if found.group(1).decode() != self.secret:
                continue  # looks like ours but is not: ordinary output
            marker = Marker(
                int(found.group(2)),
                int(found.group(3)),
                found.group(4).decode("utf-8", "replace"),
                chunk.offset + found.start(),
                chunk.offset + found.end(),
            )
            last_end = marker.end
            if marker.seq <= self.last_seq:
                continue
            self.last_seq = marker.seq
            self.cwd = marker.cwd
            self.markers.append(marker)
            del self.markers[:-64]
            pending = self.pending
            if pending is not None and marker.seq >= pending.expect_seq:
                self.pending = None
                self.commands[marker.seq] = pending.command
                if not pending.done.done():
                    pending.done.set_result(marker)
        # Keep enough tail to find a marker split across reads.
        self._scan_from = (
            last_end if last_end is not None else max(start, self.buffer.total - _MARKER_MAX)
        )

    def input_reaches_shell(self) -> bool:
        """Whether typed input can reach a shell reading commands: the session's own
        shell at its prompt, or reading the terminal itself (it is the terminal's
        foreground process group), or a shell started under it (``bash | cat``,
        ``script``, ``python -c 'import pty; pty.spawn("sh")'``)."""
        pending = self.pending
        if pending is None:
            return True
        try:
            if os.tcgetpgrp(self.master) == self.process.pid:
                return True
        except OSError:
            return True
        deciders = (pending.analysis or analyze(pending.command)).deciders
        if deciders and innermost(deciders[-1]).program in _SHELL_NAMES:
            return True
        try:
            children = psutil.Process(self.process.pid).children(recursive=True)
        except psutil.Error:
            return True
        for child in children:
            with contextlib.suppress(psutil.Error):
                names = {child.name(), os.path.basename(child.exe() or "")}
                if any(is_shell(n) or n in _SHELL_NAMES for n in names if n):
                    return True
        return False

    def discard_typed_input(self) -> None:
        """Drop input typed earlier that no program read (a partial line would be
        prefixed to the command written next); complete lines are dropped by the shell's
        prompt hook before it reads again."""
        if self.tty_path is None:
            return
        with contextlib.suppress(OSError):
            fd = os.open(self.tty_path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
            try:
                termios.tcflush(fd, termios.TCIFLUSH)
            finally:
                os.close(fd)

    def write(self, text: str) -> None:
        self._write_queue += text.encode("utf-8")
        self._flush_writes()

    def _flush_writes(self) -> None:
        loop = asyncio.get_running_loop()
        while self._write_queue:
            try:
                written = os.write(self.master, self._write_queue)
            except BlockingIOError:
                loop.add_writer(self.master, self._on_writable)
                return
            except OSError:
                self._write_queue.clear()
                return
            del self._write_queue[:written]
        with contextlib.suppress(Exception):
            loop.remove_writer(self.master)

    def _on_writable(self) -> None:
        self._flush_writes()

    def resize(self, cols: int, rows: int) -> None:
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        with self._screen_lock:
            self.screen.resize(rows, cols)
        self.cols, self.rows = cols, rows

    def touch(self) -> None:
        self.last_used = time.monotonic()
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        if self.idle_timeout > 0 and not self.closed:
            self._idle_timer = asyncio.get_running_loop().call_later(
                self.idle_timeout, self.manager._reap_idle, self
            )

    @property
    def idle_sec(self) -> float:
        return time.monotonic() - self.last_used

    # -- reading ---------------------------------------------------------------------------

    def text_between(self, start: int, end: int, raw: bool) -> tuple[str, int]:
        """Output between two offsets with our markers removed (and noise, unless raw)."""
        chunk = self.buffer.read(start, max(0, end - start))
        data = _MARKER.sub(
            lambda m: b"" if m.group(1).decode() == self.secret else m.group(0), chunk.data
        )
        if not raw:
            data = clean(data.replace(b"\r\n", b"\n"))
        if self.masker is not None:
            # Again after cleaning and marker removal, which join what was apart.
            data = self.masker.redactor.mask(data)
        return data.decode("utf-8", "replace"), chunk.dropped

    async def render_screen(self) -> tuple[str, tuple[int, int]]:
        """The screen as a terminal shows it now. The emulator (pyte, pure Python, about
        0.25 MB/s) is fed only when a screen is asked for, in a worker thread: fed on the
        event loop with every read, a flood of output stalled every other call. When more
        than _SCREEN_REPLAY_BYTES arrived since the last render, the screen is rebuilt from
        that much of the tail, which is what full-screen programs redraw from anyway."""
        async with self._render_order:
            start = max(self._screen_fed, self.buffer.first_available)
            end = self.buffer.total
            replay = end - start > _SCREEN_REPLAY_BYTES
            if replay:
                start = end - _SCREEN_REPLAY_BYTES
            data = self.buffer.read(start, end - start).data
            self._screen_fed = end
            return await asyncio.to_thread(self._feed_and_render, data, replay)

    def _feed_and_render(self, data: bytes, replay: bool) -> tuple[str, tuple[int, int]]:
        with self._screen_lock:
            if replay or self._screen_stale:
                # After a render that ran out of time, start afresh from what is new
                # (replaying the same costly tail would run out of time again).
                self.screen.reset()
                self._screen_stale = False
            # The cost of a byte varies a thousandfold (ESC # 8 fills the whole screen), so
            # the emulator is fed in small slices under a time budget. Past it the screen
            # shows what was fed so far.
            deadline = time.monotonic() + _SCREEN_RENDER_BUDGET_SEC
            for start in range(0, len(data), _SCREEN_SLICE_BYTES):
                if time.monotonic() > deadline:
                    self._screen_stale = True
                    break
                with contextlib.suppress(Exception):  # a malformed sequence must not end it
                    self.stream.feed(data[start : start + _SCREEN_SLICE_BYTES])
            lines = [line.rstrip() for line in self.screen.display]
            while lines and not lines[-1]:
                lines.pop()
            text = "\n".join(lines)
            if self.masker is not None:
                # Cursor moves can draw a value from pieces that were never adjacent.
                text = self.masker.redactor.mask_text(text)
            return text, (self.screen.cursor.y + 1, self.screen.cursor.x + 1)


class PtyManager:
    """Owns the open sessions: caps, open and close, idle reaping and the run modes. It is
    handed its collaborators, so it knows nothing of the runtime that wires them."""

    def __init__(
        self,
        *,
        settings: Settings,
        registry: ProcessRegistry,
        launch: LaunchGate,
        audit: AuditLog,
    ) -> None:
        self.settings = settings
        self.registry = registry
        self.launch = launch
        self.audit = audit
        self.sessions: dict[str, PtySession] = {}

    # -- open / close ------------------------------------------------------------------------

    def _cap_message(self) -> str:
        listing = (
            ", ".join(
                f"{s.id} (idle {s.idle_sec:.0f} s, cwd {s.cwd})"
                for s in self.sessions.values()
                if owners.visible(s.scope)
            )
            or "none of yours"
        )
        return (
            f"PTY cap reached: too many PTY sessions ({self.settings.max_pty_sessions}, the "
            f"max_pty_sessions setting); close one with terminal_pty_close. Open: {listing}"
        )

    async def open(
        self,
        *,
        cwd: str | None,
        default_cwd: str,
        env: Mapping[str, object] | None,
        cols: int,
        rows: int,
        idle_timeout: float,
        shell: str | None,
    ) -> PtySession:
        if not (10 <= cols <= 1000 and 5 <= rows <= 500):
            raise InvalidInput("cols must be 10-1000 and rows 5-500")
        plan = self.launch.shell_session(
            cwd=cwd, default_cwd=default_cwd, env=env, shell=shell, cols=cols, rows=rows
        )
        if len(self.sessions) >= self.settings.max_pty_sessions:
            raise CapReached(self._cap_message())
        master, slave = os.openpty()
        try:
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            os.set_blocking(master, False)
            spec = SpawnSpec(argv=plan.argv, cwd=plan.cwd, env=plan.env, tty=slave)
            process = await self.registry.spawn(spec)
            tty_path = os.ttyname(slave)
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        session_id = "pty_" + secrets.token_hex(4)
        session = PtySession(
            self, session_id, master, process, plan.shell, cols, rows, idle_timeout
        )
        session.cwd = plan.cwd
        session.tty_path = tty_path
        session.masker = plan.redactor.stream(_MARKER) if plan.redactor else None
        self.sessions[session_id] = session
        asyncio.get_running_loop().add_reader(master, session._on_readable)
        try:
            await self._initialise(session)
        except BaseException:
            await self.close(session, force=True)
            raise
        session.touch()
        return session

    async def _initialise(self, session: PtySession) -> None:
        """Turn echo off, empty the prompts and install the completion marker."""
        setup = (
            "stty -echo; unset HISTFILE; set +o history +H; PS1=''; PS2=''; PS4='+ '; "
            f"__tt_secret={session.secret}; __tt_n=0; "
            # Lines typed while a command ran that it did not read would run now.
            "__tt_prompt() { local s=$?; [ -t 0 ] && while read -r -t 0; do read -r _; done; "
            "__tt_n=$((__tt_n+1)); "
            'printf \'\\033]7770;%s:%s;%s;%s\\007\' "$__tt_secret" "$__tt_n" "$s" '
            '"$PWD"; return $s; }; PROMPT_COMMAND=__tt_prompt\n'
        )
        pending = Pending("setup", 1, session.buffer.total, time.monotonic())
        session.pending = pending
        session.write(setup)
        try:
            marker = await asyncio.wait_for(asyncio.shield(pending.done), 10)
        except TimeoutError:
            raise InvalidInput("the shell did not start in the PTY within 10 s") from None
        session.read_offset = marker.end
        # The screen starts after the setup: bash's first prompt and the echoed setup line
        # (it is typed before echo is off) are not the session's output.
        session._screen_fed = marker.end

    async def close(self, session: PtySession, *, force: bool) -> tuple[str, int | None]:
        """Polite ``exit`` (unless forced or busy), then end the whole tree."""
        if session.closed:
            return "", session.process.returncode
        session.closed = True
        self.sessions.pop(session.id, None)
        if session._idle_timer is not None:
            session._idle_timer.cancel()
        process = session.process
        if not force and session.pending is None and process.running:
            session.write("exit\n")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.exited.wait(), 1.0)
        await self.registry.end_tree(process)
        await process.wait_done(self.settings.kill_grace_sec + 1)
        # Let the last bytes in the PTY arrive before reading them.
        with contextlib.suppress(Exception):
            while True:
                data = os.read(session.master, _READ_SIZE)
                if not data:
                    break
                session.buffer.append(data)
        session._stop_reading()
        with contextlib.suppress(Exception):
            asyncio.get_running_loop().remove_writer(session.master)
        with contextlib.suppress(OSError):
            os.close(session.master)
        output, _ = session.text_between(session.read_offset, session.buffer.total, raw=False)
        session.buffer.release()
        return output, process.returncode

    def _reap_idle(self, session: PtySession) -> None:
        if not session.closed and session.idle_sec >= session.idle_timeout - 0.05:
            self.registry.track_task(self.close(session, force=True))

    def find(self, session_id: str) -> PtySession | None:
        """The open session with this id, if it belongs to the calling client."""
        session = self.sessions.get(session_id)
        return session if session is not None and owners.visible(session.scope) else None

    def get(self, session_id: str) -> PtySession:
        session = self.find(session_id)
        if session is None:
            known = ", ".join(s.id for s in self.sessions.values() if owners.visible(s.scope))
            known = known or "none"
            raise NotFound(
                f"unknown or closed PTY session {session_id!r}; open sessions: "
                f"{known}. Sessions close after idle_timeout_sec without use."
            )
        if not session.process.running:
            self.registry.track_task(self.close(session, force=True))
            raise NotFound(
                f"the shell of session {session_id} has exited (status "
                f"{session.process.returncode}); open a new session"
            )
        return session

    async def shutdown(self) -> None:
        for session in list(self.sessions.values()):
            with contextlib.suppress(Exception):
                await self.close(session, force=True)

    # -- run modes -------------------------------------------------------------------------

    async def interact(self, session: PtySession, request: PtyRequest) -> RunOutcome:
        """Carry out one terminal_pty_run call and record it in the audit log (a policy
        refusal raises :class:`Blocked`, which the launch gate has recorded)."""
        modes = [request.command is not None, request.raw_send is not None, request.read_only]
        if sum(modes) > 1:
            raise InvalidInput("give one of command, raw_send or read_only")
        started = time.monotonic()
        outcome = await self._dispatch(session, request)
        audit = self.audit
        if audit:
            verdict = outcome.verdict
            kind = (
                "pty_run"
                if request.command is not None
                else "pty_send"
                if request.raw_send is not None
                else "pty_read"
            )
            audit.record(
                kind,
                tool="terminal_pty_run",
                session_id=session.id,
                command=request.command,
                cwd=session.cwd,
                shell_kind="bash",
                exit_code=outcome.exit_code,
                semantic_status=verdict.status if verdict else None,
                duration_ms=elapsed_ms(started),
                bytes_out=len(outcome.output.encode()),
                bytes_in=len(request.raw_send.encode()) if request.raw_send is not None else None,
                blocked=False,
                warning=outcome.warning,
            )
        return outcome

    async def _dispatch(self, session: PtySession, request: PtyRequest) -> RunOutcome:
        command, raw_send, expect = request.command, request.raw_send, request.expect
        timeout, raw = request.timeout, request.raw
        if command is not None and expect is None:
            return await self.run(session, command, timeout=timeout, raw=raw)
        if command is not None:
            if session.pending is None:
                await self.start_command(session, command)
            else:
                await self.send(session, command + "{Enter}")
        sent = None
        if command is None and raw_send is not None:
            sent = await self.send(session, raw_send, keys=not request.verbatim)
        if expect is not None:
            outcome = await self.expect(
                session, expect, timeout=timeout, raw=raw, regex_timeout=request.regex_timeout
            )
            outcome.bytes_sent = sent
            return outcome
        if command is not None or raw_send is not None:
            return RunOutcome(output="", next_offset=session.read_offset, bytes_sent=sent)
        return await self.read(session, timeout=timeout, raw=raw)

    async def start_command(self, session: PtySession, command: str) -> Analysis:
        """Send a command line to the idle shell without waiting (used with expect).
        Returns its analysis; its warnings (destructive command, policy) go on the
        pending command."""
        problem = unbalanced_quote(command)
        if problem:
            raise InvalidInput(problem + " (the shell would wait for more input)")
        analysis, policy_warning = await self.launch.session_command(
            command, session_id=session.id, cwd=session.cwd
        )
        if session.pending is not None:  # another call started one while this was vetted
            raise SessionBusy(self._busy(session).message or "session busy")
        warnings = [w for w in (destructive_warning(analysis), policy_warning) if w]
        session.pending = Pending(
            command,
            session.last_seq + 1,
            session.buffer.total,
            time.monotonic(),
            analysis=analysis,
            warning="; ".join(warnings) or None,
        )
        # A multi-line command is grouped so that the prompt (and marker) comes once.
        line = "{ " + command + "\n}" if "\n" in command.strip() else command.strip()
        session.discard_typed_input()
        session.write(line + "\n")
        return analysis

    async def check_typed(self, session: PtySession, text: str) -> None:
        """Typed input forms commands when it reaches a shell; the launch gate decides
        (a REPL's input is not a command)."""
        await self.launch.typed_input(
            text, at_shell=session.input_reaches_shell, session_id=session.id, cwd=session.cwd
        )

    async def run(
        self, session: PtySession, command: str, *, timeout: float, raw: bool
    ) -> RunOutcome:
        session.touch()
        if session.pending is not None:
            return self._busy(session)
        start = session.buffer.total
        try:
            analysis = await self.start_command(session, command)
        except SessionBusy:
            return self._busy(session)
        pending = session.pending
        assert pending is not None
        warning = pending.warning
        try:
            marker = await asyncio.wait_for(asyncio.shield(pending.done), timeout or None)
        except TimeoutError:
            text, dropped = session.text_between(start, session.buffer.total, raw)
            session.read_offset = session.buffer.total
            return RunOutcome(
                output=text,
                timed_out=True,
                running=True,
                warning=warning,
                next_offset=session.read_offset,
                dropped=dropped,
                message=(
                    f"still running after {timeout:g} s; read more with read_only, or "
                    "interrupt with raw_send='{Ctrl-C}'"
                ),
            )
        text, dropped = session.text_between(start, marker.start, raw)
        session.read_offset = marker.end
        verdict = classify_exit(
            marker.status, analysis, shell_kind="bash", stderr_tail=text[-2048:]
        )
        return RunOutcome(
            output=text,
            exit_code=marker.status,
            verdict=verdict,
            warning=warning,
            next_offset=marker.end,
            dropped=dropped,
        )

    def _busy(self, session: PtySession) -> RunOutcome:
        pending = session.pending
        assert pending is not None
        return RunOutcome(
            output="",
            busy=True,
            running=True,
            next_offset=session.read_offset,
            message=(
                f"busy: `{pending.command[:200]}` has been running for "
                f"{time.monotonic() - pending.started:.0f} s. Interrupt it with "
                "raw_send='{Ctrl-C}', follow it with read_only=true, or talk to it "
                "with raw_send/expect."
            ),
        )

    async def send(self, session: PtySession, text: str, *, keys: bool = True) -> int:
        """Type ``text`` (``{Enter}``-style names turned into keys unless ``keys`` is
        false, then exactly as given); returns the bytes written."""
        session.touch()
        typed = encode_keys(text) if keys else text
        await self.check_typed(session, typed)
        session.write(typed)
        return len(typed.encode("utf-8"))

    async def expect(
        self, session: PtySession, pattern: str, *, timeout: float, raw: bool, regex_timeout: float
    ) -> RunOutcome:
        """Wait until output since the last read matches ``pattern``."""
        session.touch()
        compiled = compile_pattern(pattern, regex.MULTILINE, what="expect regex")
        start = session.read_offset
        deadline = time.monotonic() + timeout
        hit = None
        while True:
            text, dropped = session.text_between(start, session.buffer.total, raw)
            try:
                # In a worker thread: the regex module releases the GIL while it matches,
                # so a slow pattern holds up this call only.
                hit = await asyncio.to_thread(
                    functools.partial(compiled.search, text, timeout=regex_timeout, concurrent=True)
                )
            except TimeoutError:
                raise InvalidInput(
                    "expect pattern took too long to evaluate; simplify it"
                ) from None
            remaining = deadline - time.monotonic()
            if hit or remaining <= 0 or session.buffer.eof:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(session.buffer.wait_beyond(session.buffer.total), remaining)
        end = session.buffer.total
        session.read_offset = end
        outcome = RunOutcome(
            output=text,
            matched=hit is not None,
            match=hit.group(0) if hit else None,
            next_offset=end,
            dropped=dropped,
            running=session.pending is not None,
        )
        if hit is None:
            outcome.timed_out = True
            outcome.message = f"no match for expect within {timeout:g} s"
        self._attach_exit(session, start, outcome)
        return outcome

    async def read(self, session: PtySession, *, timeout: float, raw: bool) -> RunOutcome:
        """Output since the last read, once it has settled for a moment."""
        session.touch()
        limit = (
            time.monotonic() + min(timeout, _READ_ONLY_MAX_SEC)
            if timeout
            else (time.monotonic() + _READ_ONLY_MAX_SEC)
        )
        more = False
        while True:
            seen = session.buffer.total
            remaining = limit - time.monotonic()
            if remaining <= 0:
                more = True
                break
            try:
                await asyncio.wait_for(
                    session.buffer.wait_beyond(seen), min(_SETTLE_SEC, remaining)
                )
            except TimeoutError:
                break  # quiet for the settle window
            if session.buffer.eof:
                break
        start = session.read_offset
        end = session.buffer.total
        text, dropped = session.text_between(start, end, raw)
        session.read_offset = end
        outcome = RunOutcome(
            output=text,
            more=more,
            next_offset=end,
            dropped=dropped,
            running=session.pending is not None,
        )
        self._attach_exit(session, start, outcome)
        return outcome

    @staticmethod
    def _attach_exit(session: PtySession, start: int, outcome: RunOutcome) -> None:
        """If a command finished within what was just read, report its exit status."""
        finished = [m for m in session.markers if start <= m.start < outcome.next_offset]
        if finished:
            marker = finished[-1]
            command = session.commands.get(marker.seq)
            outcome.exit_code = marker.status
            outcome.verdict = classify_exit(
                marker.status, analyze(command) if command else None, shell_kind="bash"
            )

"""Spawning commands in their own process group, and ending whole process trees.

Every command gets a new session (so a new process group): signals, timeouts and
shutdown act on the group, so ``bash -c 'sleep 300 & sleep 300'`` leaves nothing behind.
Descendants that left the group (``setsid``, daemons) are found through psutil (the
process tree, and the owner mark each child inherits in its environment) and ended too.

The :class:`ProcessRegistry` owns every live process and every task that ends one; it
reports process groups to the watchdog, which kills them if the server dies first.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from . import watchdog as watchdog_module
from .buffers import SpoolBudget, StreamBuffer
from .redact import Redactor

log = logging.getLogger(__name__)

OutputListener = Callable[[str, bytes], None]


@dataclass(frozen=True)
class Limits:
    """Resource limits applied to a command with ``ulimit`` before it starts."""

    cpu_sec: int | None = None
    rss_mb: int | None = None
    fsize_mb: int | None = None
    nofile: int | None = None

    def ulimit_script(self) -> str:
        parts = []
        if self.cpu_sec is not None:
            parts.append(f"ulimit -t {self.cpu_sec}")
        if self.rss_mb is not None:
            # RLIMIT_RSS is not enforced by Linux; the address-space limit is.
            parts.append(f"ulimit -v {self.rss_mb * 1024}")
        if self.fsize_mb is not None:
            parts.append(f"ulimit -f {self.fsize_mb * 1024}")  # bash counts 1024-byte blocks
        if self.nofile is not None:
            parts.append(f"ulimit -n {self.nofile}")
        return " && ".join(parts)

    def wrap(self, argv: list[str], bash: str) -> list[str]:
        script = self.ulimit_script()
        if not script:
            return argv
        return [bash, "-c", script + ' && exec "$@"', "terminal-tools-limits", *argv]


@dataclass(frozen=True)
class SpawnSpec:
    argv: list[str]
    cwd: str
    env: dict[str, str]
    stdin: bytes | None = None  # bytes: written then closed; None: /dev/null
    keep_stdin_open: bool = False  # jobs: a pipe the agent can write to later
    merge_stderr: bool = False
    limits: Limits | None = None
    spool_limit: int = 0
    # The slave side of a PTY: becomes the child's stdin, stdout, stderr and controlling
    # terminal. Output is then read from the master side by the PTY session, not here.
    tty: int | None = None
    # Masks secret values in the output before anything stores or sees it.
    redactor: Redactor | None = None


class ManagedProcess:
    """One spawned command: its process group, its output, its end."""

    def __init__(self, registry: ProcessRegistry, spec: SpawnSpec, owner: str) -> None:
        self.registry = registry
        self.spec = spec
        self.owner = owner
        settings_window = registry.window_bytes
        self.stdout = StreamBuffer(settings_window, spec.spool_limit, registry.budget)
        self.stderr = (
            None
            if spec.merge_stderr
            else StreamBuffer(settings_window, spec.spool_limit, registry.budget)
        )
        self.started = time.monotonic()
        self.started_wall = time.time()
        self.ended: float | None = None
        self.pid = 0
        self.returncode: int | None = None
        self.timed_out = False
        self.killed_by_request = False
        self.leftovers_killed = 0
        self.notes: list[str] = []
        self.exited = asyncio.Event()  # the main process has exited
        self.done = asyncio.Event()  # exited and output fully collected
        self.listener: OutputListener | None = None
        self._transport: asyncio.SubprocessTransport | None = None
        self._open_pipes = 0 if spec.tty is not None else 1 if spec.merge_stderr else 2
        self._deadline: asyncio.TimerHandle | None = None
        self._drain_timer: asyncio.TimerHandle | None = None
        self._stdin_open = spec.stdin is not None or spec.keep_stdin_open
        self._maskers = (
            {1: spec.redactor.stream(), 2: spec.redactor.stream()} if spec.redactor else {}
        )
        self._leftovers_checked = False
        self._ending_leftovers = False
        self._pipes_closed = asyncio.Event()
        if self._open_pipes == 0:
            self._pipes_closed.set()

    # Callbacks can arrive before ``loop.subprocess_exec`` returns (a fast command may
    # print and exit first), so everything they need is set in ``connection_made``.
    def _on_start(self, transport: asyncio.SubprocessTransport) -> None:
        self._transport = transport
        self.pid = transport.get_pid()
        self.registry._adopt(self)

    # -- lifecycle callbacks (from the protocol) -------------------------------------------

    def _on_data(self, fd: int, data: bytes) -> None:
        name = "stdout" if fd == 1 else "stderr"
        masker = self._maskers.get(fd)
        if masker is not None:
            data = masker.feed(data)
        self._deliver(fd, name, data)

    def _deliver(self, fd: int, name: str, data: bytes) -> None:
        if not data:
            return
        buffer = self.stdout if fd == 1 or self.stderr is None else self.stderr
        buffer.append(data)
        if self.listener is not None:
            self.listener(name, data)

    def _on_pipe_closed(self, fd: int) -> None:
        if fd == 0:
            self._stdin_open = False
            return
        masker = self._maskers.get(fd)
        if masker is not None:
            self._deliver(fd, "stdout" if fd == 1 else "stderr", masker.flush())
        self._open_pipes -= 1
        if self._open_pipes <= 0:
            self._pipes_closed.set()
        self._maybe_done()

    def _on_exit(self) -> None:
        assert self._transport is not None
        self.returncode = self._transport.get_returncode()
        self.ended = time.monotonic()
        self.exited.set()
        if self._deadline is not None:
            self._deadline.cancel()
        if self._open_pipes > 0:
            # Descendants still hold the output pipes (``cmd &``). Give them a moment to
            # finish, then end them: a command's processes must not outlive it.
            self._drain_timer = asyncio.get_running_loop().call_later(
                self.registry.drain_grace, self._end_leftovers
            )
        self._maybe_done()

    def _maybe_done(self) -> None:
        if self.done.is_set() or not self.exited.is_set() or self._open_pipes > 0:
            return
        if self._drain_timer is not None:
            self._drain_timer.cancel()
        if self._ending_leftovers:
            return  # finished by the task that ends them, once it knows how many
        if not self._leftovers_checked and self.spec.tty is None and self._group_alive():
            # The main process is gone but members of its group are not (``cmd &`` with
            # its output redirected elsewhere): they are ended before the command counts
            # as done, so no process outlives the command that started it.
            self._end_leftovers()
            return
        self._finish()

    def _finish(self) -> None:
        if self.done.is_set():
            return
        self.stdout.close()
        if self.stderr is not None:
            self.stderr.close()
        if self._transport is not None:
            self._transport.close()  # the process has exited: this only frees the pipes
        self.done.set()
        self.registry._forget(self)

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.pid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def _end_leftovers(self) -> None:
        self._leftovers_checked = True
        self._ending_leftovers = True
        self.registry.track_task(self._end_leftovers_async())

    async def _end_leftovers_async(self) -> None:
        try:
            self.leftovers_killed = await self.registry.end_tree(self, include_leader=False)
            try:
                await asyncio.wait_for(self._pipes_closed.wait(), self.registry.kill_grace)
            except TimeoutError:
                # Processes that escaped every scan still hold the pipes: stop listening.
                if self._transport is not None:
                    for fd in (1, 2):
                        pipe = self._transport.get_pipe_transport(fd)
                        if pipe is not None:
                            pipe.close()
        finally:
            self._ending_leftovers = False
            self._maybe_done()

    # -- control -------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return not self.exited.is_set()

    @property
    def stdin_open(self) -> bool:
        return self._stdin_open

    @property
    def runtime_ms(self) -> int:
        end = self.ended if self.ended is not None else time.monotonic()
        return int((end - self.started) * 1000)

    def set_deadline(self, seconds_from_start: float | None) -> None:
        """Kill the tree ``seconds_from_start`` after the command started (None: never)."""
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if not seconds_from_start or not self.running:
            return
        loop = asyncio.get_running_loop()
        delay = max(0.0, self.started + seconds_from_start - time.monotonic())
        self._deadline = loop.call_later(delay, self._expire)

    def _expire(self) -> None:
        if self.running:
            self.timed_out = True
            self.registry.track_task(self.registry.end_tree(self))

    def write_stdin(self, data: bytes) -> None:
        """Queue ``data`` for the child's stdin without blocking the server."""
        pipe = self._stdin_pipe()
        if pipe is None:
            raise ProcessLookupError("stdin is closed")
        pipe.write(data)

    def close_stdin(self) -> None:
        pipe = self._stdin_pipe()
        if pipe is not None:
            pipe.close()
        self._stdin_open = False

    def _stdin_pipe(self) -> asyncio.WriteTransport | None:
        if not self._stdin_open or self._transport is None:
            return None
        pipe = self._transport.get_pipe_transport(0)
        if pipe is None or pipe.is_closing():
            self._stdin_open = False
            return None
        return pipe  # type: ignore[return-value]

    def signal_group(self, signum: int) -> bool:
        """Send ``signum`` to the whole process group; False if it is already gone."""
        try:
            os.killpg(self.pid, signum)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    async def wait_done(self, timeout: float | None) -> bool:
        try:
            await asyncio.wait_for(self.done.wait(), timeout)
            return True
        except TimeoutError:
            return False


class _Protocol(asyncio.SubprocessProtocol):
    def __init__(self, process: ManagedProcess) -> None:
        self.process = process

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.process._on_start(transport)  # type: ignore[arg-type]

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.process._on_data(fd, data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self.process._on_pipe_closed(fd)

    def process_exited(self) -> None:
        self.process._on_exit()


class ProcessRegistry:
    """Owner of every live child process and of every task that ends one."""

    def __init__(
        self,
        *,
        instance: str,
        window_bytes: int,
        budget: SpoolBudget,
        kill_grace: float,
        drain_grace: float,
        use_watchdog: bool = True,
    ) -> None:
        self.instance = instance
        self.window_bytes = window_bytes
        self.budget = budget
        self.kill_grace = kill_grace
        self.drain_grace = drain_grace
        self.live: set[ManagedProcess] = set()
        self._tasks: set[asyncio.Task[object]] = set()
        self._counter = itertools.count(1)
        self._watchdog: subprocess.Popen[bytes] | None = None
        if use_watchdog and os.name == "posix":
            self._start_watchdog()

    # -- spawning --------------------------------------------------------------------------

    def next_owner(self) -> str:
        return f"{self.instance}:{next(self._counter)}"

    async def spawn(
        self, spec: SpawnSpec, listener: OutputListener | None = None
    ) -> ManagedProcess:
        """Start ``spec``. ``listener`` sees every chunk from the first byte on (output
        can arrive before this coroutine resumes)."""
        owner = spec.env.get(watchdog_module.OWNER_ENV) or self.next_owner()
        process = ManagedProcess(self, spec, owner)
        process.listener = listener
        argv = spec.limits.wrap(spec.argv, _bash_for_limits()) if spec.limits else spec.argv
        stdin: int = subprocess.DEVNULL
        if spec.stdin is not None or spec.keep_stdin_open:
            stdin = subprocess.PIPE
        stdout: int = subprocess.PIPE
        stderr: int = subprocess.STDOUT if spec.merge_stderr else subprocess.PIPE
        if spec.tty is not None:
            argv = [sys.executable, "-I", "-S", "-c", _CTTY_HELPER, *argv]
            stdin = stdout = stderr = spec.tty
        loop = asyncio.get_running_loop()
        transport, _ = await loop.subprocess_exec(
            lambda: _Protocol(process),
            *argv,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            cwd=spec.cwd,
            env=spec.env,
            start_new_session=True,
            close_fds=True,
        )
        del transport  # kept by the process since connection_made
        if spec.stdin is not None:
            process.write_stdin(spec.stdin)
            if not spec.keep_stdin_open:
                process.close_stdin()
        return process

    def _adopt(self, process: ManagedProcess) -> None:
        self.live.add(process)
        self._watch(f"+{process.pid}")

    def _forget(self, process: ManagedProcess) -> None:
        self.live.discard(process)
        self._watch(f"-{process.pid}")

    # -- ending ----------------------------------------------------------------------------

    async def end_tree(
        self, process: ManagedProcess, *, include_leader: bool = True, gentle: bool = True
    ) -> int:
        """TERM the whole tree, wait ``kill_grace``, KILL what is left (only KILL when not
        ``gentle``). Returns how many processes other than the main one were found."""
        members = await asyncio.to_thread(_tree_members, process)
        if not gentle:
            process.signal_group(signal.SIGKILL)
            for member in members:
                with contextlib.suppress(psutil.Error):
                    member.kill()
            return len(members)
        process.signal_group(signal.SIGTERM)
        for member in members:
            with contextlib.suppress(psutil.Error):
                member.terminate()
        try:
            if include_leader and process.running:
                await asyncio.wait_for(process.exited.wait(), self.kill_grace)
            if members:
                await asyncio.to_thread(_wait_gone, members, self.kill_grace)
        except TimeoutError:
            pass
        process.signal_group(signal.SIGKILL)
        for member in members:
            with contextlib.suppress(psutil.Error):
                member.kill()
        return len(members)

    def track_task(self, coro: Coroutine[Any, Any, object]) -> asyncio.Task[object]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def shutdown(self) -> None:
        """End every live process tree and wait for the tasks that do it."""
        processes = list(self.live)
        await asyncio.gather(*(self.end_tree(p) for p in processes), return_exceptions=True)
        for process in processes:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.done.wait(), self.kill_grace + 1)
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        self.stop_watchdog()

    def kill_all_now(self) -> None:
        """Synchronous last resort (signal handlers): SIGKILL every group we own."""
        for process in list(self.live):
            process.signal_group(signal.SIGKILL)
        with contextlib.suppress(Exception):
            watchdog_module.kill_marked(self.instance)

    # -- watchdog --------------------------------------------------------------------------

    def _start_watchdog(self) -> None:
        try:
            self._watchdog = subprocess.Popen(
                [sys.executable, "-u", str(Path(watchdog_module.__file__)), self.instance],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,  # stdout belongs to the MCP protocol
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            log.warning("watchdog not started: %s", exc)

    def _watch(self, line: str) -> None:
        if self._watchdog is None or self._watchdog.stdin is None:
            return
        try:
            self._watchdog.stdin.write(line.encode() + b"\n")
            self._watchdog.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            self._watchdog = None

    def stop_watchdog(self) -> None:
        if self._watchdog is None:
            return
        watchdog, self._watchdog = self._watchdog, None
        with contextlib.suppress(OSError, ValueError):
            if watchdog.stdin:
                watchdog.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            watchdog.wait(timeout=5)

    @property
    def watchdog_pid(self) -> int | None:
        return self._watchdog.pid if self._watchdog else None


def _tree_members(process: ManagedProcess) -> list[psutil.Process]:
    """Descendants of the command and processes carrying its owner mark (not the leader)."""
    members: dict[int, psutil.Process] = {}
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(process.pid).children(recursive=True):
            members[child.pid] = child
    for marked in watchdog_module.marked_processes(lambda owner: owner == process.owner):
        members.setdefault(marked.pid, marked)
    members.pop(process.pid, None)
    return [m for m in members.values() if _alive(m)]


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _wait_gone(procs: list[psutil.Process], timeout: float) -> None:
    # Not psutil.wait_procs: for our own children it would reap them behind asyncio's back.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in procs):
            return
        time.sleep(0.02)
    raise TimeoutError


# Runs in the new session before the real program: makes the PTY (fd 0) the controlling
# terminal, which Ctrl-C, job control and programs that open /dev/tty need. Done in a
# helper process because doing it between fork and exec (preexec_fn) is unsafe in a
# threaded server.
_CTTY_HELPER = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)


def _bash_for_limits() -> str:
    return "/bin/bash" if os.path.exists("/bin/bash") else "bash"


def new_instance_id() -> str:
    me = psutil.Process()
    return f"{me.pid}.{int(me.create_time() * 1000)}.{os.urandom(4).hex()}"

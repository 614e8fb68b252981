"""Spawning commands in their own process group, and ending whole process trees.

Every command gets a new session (so a new process group): signals, timeouts and
shutdown act on the group, so ``bash -c 'sleep 300 & sleep 300'`` leaves nothing behind.
Descendants that leave the group (``setsid``, daemons, ``env -i`` dropping the owner
mark) are held by the strongest mechanism the host offers (the *containment*):

* ``cgroup``: each command runs in a cgroup v2 of its own, which no child can leave;
  ending the command writes ``cgroup.kill``, which also takes processes forked meanwhile.
* ``subreaper``: the server and each command's main process are child subreapers
  (``PR_SET_CHILD_SUBREAPER``), so an orphan reparents to its command while the command
  runs and to the server once it has exited; the server finds it there, without the mark.
* ``marks``: only the process tree and the owner mark each child inherits in its
  environment (a child can strip it: the weakest net, used where nothing else exists).

Whatever the containment, when a command's main process exits everything it left running
is ended, and trees are stopped (SIGSTOP) before they are killed and walked again until
nothing is left, so a process forking in a loop cannot outrun the kill.

The :class:`ProcessRegistry` owns every live process and every task that ends one; it
reports commands to the watchdog, which kills them if the server dies first, and starts
a new watchdog if that one dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import glob
import itertools
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import psutil

try:
    import fcntl as _fcntl
except ImportError:  # Windows
    _fcntl = None  # type: ignore[assignment]

from . import watchdog as watchdog_module
from .buffers import SpoolBudget, StreamBuffer
from .redact import Redactor

log = logging.getLogger(__name__)

OutputListener = Callable[[str, bytes], None]
ContainmentKind = Literal["cgroup", "subreaper", "marks"]

_PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
_KILL_ROUNDS = 25  # bound on stop/kill/rescan rounds when ending a tree
_NAMES_IN_NOTE = 8


# Children of this process that the server started itself (commands, rg, the watchdog),
# process-wide because several servers can share a process (tests). In ``subreaper`` mode
# any other child is an orphan some command left behind. ``_SPAWNING`` counts spawns
# between fork and registration, when a new child is not yet in the set.
DIRECT_CHILDREN: set[int] = set()
_SPAWNING = [0]


@contextlib.contextmanager
def spawning() -> Iterator[Callable[[int], None]]:
    """Wrap a spawn of a direct child: ``register(pid)`` once it is started."""
    _SPAWNING[0] += 1
    try:
        yield DIRECT_CHILDREN.add
    finally:
        _SPAWNING[0] -= 1


def forget_child(pid: int) -> None:
    DIRECT_CHILDREN.discard(pid)


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
        self.leftovers: list[str] = []  # what the command left running, ended at its exit
        self.cgroup: str | None = None
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
        for fd in (1, 2):
            _widen_pipe(transport.get_pipe_transport(fd))
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

    @property
    def leftovers_killed(self) -> int:
        return len(self.leftovers)

    def _maybe_done(self) -> None:
        if self.done.is_set() or not self.exited.is_set() or self._open_pipes > 0:
            return
        if self._drain_timer is not None:
            self._drain_timer.cancel()
        if self._ending_leftovers:
            return  # finished by the task that ends them, once it knows what it ended
        if not self._leftovers_checked and self.registry.may_have_leftovers(self):
            # The main process is gone but what it started is not (``cmd &`` with its
            # output redirected elsewhere, ``setsid``, a daemon): it is ended before the
            # command counts as done, so no process outlives the command that started it.
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

    def group_alive(self) -> bool:
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
            self.leftovers = await self.registry.end_tree(self, include_leader=False)
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

    @property
    def stderr_bytes(self) -> int:
        """Bytes written to stderr (0 when it is merged into stdout)."""
        return self.stderr.total if self.stderr is not None else 0

    @property
    def output_bytes(self) -> int:
        """Bytes written to stdout and stderr together."""
        return self.stdout.total + self.stderr_bytes

    def error_tail(self, size: int = 2048) -> str:
        """The last ``size`` bytes of stderr (of stdout when stderr is merged into it)."""
        source = self.stderr or self.stdout
        return source.read(max(0, source.total - size), size).data.decode("utf-8", "replace")

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


# Output pipes are widened from Linux's default 64 KiB to the 256 KiB that asyncio reads
# at once: a command printing fast then hands over its output in a quarter of the
# wake-ups (on a loaded machine each wake-up can wait for a CPU), without holding more
# kernel memory than a few pages per idle pipe.
_PIPE_BYTES = 256 * 1024


def _widen_pipe(pipe: asyncio.BaseTransport | None) -> None:
    set_size = getattr(_fcntl, "F_SETPIPE_SZ", None) if _fcntl else None
    pipe_file = pipe.get_extra_info("pipe") if pipe is not None else None
    if set_size is None or pipe_file is None:
        return
    with contextlib.suppress(OSError, ValueError):
        _fcntl.fcntl(pipe_file.fileno(), set_size, _PIPE_BYTES)


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


@dataclass(frozen=True)
class Containment:
    """How this server holds the processes its commands start (see the module doc)."""

    kind: ContainmentKind
    detail: str
    cgroup: str | None = None  # the instance's cgroup directory (kind ``cgroup``)


# Claimed by the command-line server, which owns its whole process: only then may the
# process become a subreaper (an embedding program has children of its own).
_WHOLE_PROCESS = [False]


def claim_whole_process() -> None:
    _WHOLE_PROCESS[0] = True


def choose_containment(requested: str, instance: str) -> Containment:
    """The strongest containment the host allows, down to ``requested``'s level."""
    reasons = []
    if requested == "auto":
        cgroup, why = _instance_cgroup(instance)
        if cgroup is not None:
            return Containment("cgroup", f"a cgroup v2 per command under {cgroup}", cgroup)
        reasons.append(why)
    if requested in ("auto", "subreaper"):
        if not sys.platform.startswith("linux"):
            reasons.append("child subreapers exist only on Linux")
        elif not _WHOLE_PROCESS[0]:
            reasons.append("the server shares its process with other code")
        elif _set_subreaper():
            return Containment(
                "subreaper",
                "the server and each command are child subreapers"
                + (f" ({'; '.join(reasons)})" if reasons else ""),
            )
        else:
            reasons.append("prctl(PR_SET_CHILD_SUBREAPER) failed")
    if requested == "marks":
        reasons.append("the containment setting asks for owner marks only")
    return Containment(
        "marks",
        "process trees and owner marks only; a child that detaches and strips "
        "TERMINAL_TOOLS_OWNER is not found (" + "; ".join(reasons) + ")",
    )


def _instance_cgroup(instance: str) -> tuple[str | None, str]:
    if not sys.platform.startswith("linux"):
        return None, "cgroups exist only on Linux"
    parent = watchdog_module.own_cgroup_dir()
    if parent is None:
        return None, "no cgroup v2 hierarchy is mounted"
    path = os.path.join(parent, watchdog_module.CGROUP_PREFIX + instance)
    try:
        os.mkdir(path)
    except OSError as exc:
        return None, f"cannot create a cgroup in {parent} ({exc.strerror})"
    # Creating a cgroup is not enough: moving a process into it needs write access to
    # the cgroup.procs of both ends. A throwaway shell tries exactly what commands do.
    probe = os.path.join(path, "probe")
    try:
        os.mkdir(probe)
        done = subprocess.run(
            ["/bin/sh", "-c", 'echo $$ > "$0"', os.path.join(probe, "cgroup.procs")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=10,
            check=False,
        )
        joined = done.returncode == 0
        why = done.stderr.decode("utf-8", "replace").strip()[-200:]
    except (OSError, subprocess.SubprocessError) as exc:
        joined, why = False, str(exc)
    watchdog_module.wait_cgroup_empty(probe, 1.0)
    if not joined:
        watchdog_module.remove_cgroup(path)
        return None, f"cannot move processes into a cgroup under {parent} ({why})"
    watchdog_module.remove_cgroup(probe)
    return path, ""


def _set_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


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
        containment: str = "auto",
    ) -> None:
        self.instance = instance
        self.window_bytes = window_bytes
        self.budget = budget
        self.kill_grace = kill_grace
        self.drain_grace = drain_grace
        self.live: set[ManagedProcess] = set()
        self._tasks: set[asyncio.Task[object]] = set()
        self._counter = itertools.count(1)
        self._cgroups = itertools.count(1)
        self.containment = (
            choose_containment(containment, instance)
            if os.name == "posix"
            else Containment("marks", "process trees and owner marks only (not POSIX)")
        )
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._watchdog_monitored: int | None = None
        self.watchdog_restarts = 0
        self._restart_times: list[float] = []
        self.watchdog_error: str | None = None
        self._closing = False
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
        flags = ("s" if self.containment.kind == "subreaper" else "") + (
            "t" if spec.tty is not None else ""
        )
        if flags:
            argv = [sys.executable, "-I", "-S", "-c", _LAUNCH_HELPER, flags, *argv]
        if spec.tty is not None:
            stdin = stdout = stderr = spec.tty
        process.cgroup = self._new_cgroup()
        if process.cgroup is not None:
            # The command joins its cgroup before it runs anything, so even its first
            # child is born inside (moving it after the spawn would race with its forks).
            argv = ["/bin/sh", "-c", _JOIN_CGROUP, f"{process.cgroup}/cgroup.procs", *argv]
        self._ensure_watchdog_monitor()
        loop = asyncio.get_running_loop()
        with spawning():
            try:
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
            except BaseException:
                if process.cgroup is not None:
                    watchdog_module.remove_cgroup(process.cgroup)
                raise
        del transport  # kept by the process since connection_made
        if spec.stdin is not None:
            # A child may exit or close its stdin before reading it all (`true`, `head -1`):
            # as with `printf data | true`, what it did not read is dropped; the command
            # was started all the same and is tracked like any other.
            with contextlib.suppress(ProcessLookupError):
                process.write_stdin(spec.stdin)
            if not spec.keep_stdin_open:
                process.close_stdin()
        return process

    def _new_cgroup(self) -> str | None:
        root = self.containment.cgroup
        if root is None:
            return None
        path = os.path.join(root, f"c{next(self._cgroups)}")
        try:
            os.mkdir(path)
        except OSError as exc:
            log.warning("no cgroup for a command (%s): ending it relies on its tree", exc)
            return None
        return path

    def _adopt(self, process: ManagedProcess) -> None:
        self.live.add(process)
        DIRECT_CHILDREN.add(process.pid)
        self._watch(f"+{process.pid}")

    def _forget(self, process: ManagedProcess) -> None:
        self.live.discard(process)
        forget_child(process.pid)
        self._watch(f"-{process.pid}")
        if process.cgroup is not None:
            watchdog_module.remove_cgroup(process.cgroup)

    # -- finding -----------------------------------------------------------------------------

    def may_have_leftovers(self, process: ManagedProcess) -> bool:
        """Whether the exited ``process`` may have left anything running."""
        if process.spec.tty is not None:
            return False  # a PTY's shell exiting ends its session, which ends the tree
        if process.group_alive():
            return True
        if process.cgroup is not None:
            return bool(watchdog_module.cgroup_pids(process.cgroup))
        if self.containment.kind == "subreaper":
            orphans = self._orphans()
            return orphans is None or bool(orphans)
        return True  # owner marks: only a scan can tell

    def _orphans(self) -> set[int] | None:
        """Live children of this process that it did not start: in ``subreaper`` mode,
        what exited commands left behind. Zombies among them are reaped. None while a
        spawn is between fork and registration (its child would look like an orphan)."""
        if self.containment.kind != "subreaper":
            return set()
        if _SPAWNING[0]:
            return None
        found = set()
        for pid in _children_of(os.getpid()):
            if pid in DIRECT_CHILDREN:
                continue
            if _is_zombie(pid):
                with contextlib.suppress(OSError):
                    os.waitpid(pid, os.WNOHANG)
                continue
            found.add(pid)
        return found

    async def _scan(self, process: ManagedProcess) -> dict[int, psutil.Process]:
        """Everything of ``process`` still alive, its main process excepted."""
        orphans: set[int] = set()
        if self.containment.kind == "subreaper":
            for _ in range(400):
                found = self._orphans()
                if found is not None:
                    orphans = found
                    break
                await asyncio.sleep(0.005)
        if process.cgroup is not None and not orphans:
            return _tree_members(process, orphans)  # a few small reads: no thread needed
        return await asyncio.to_thread(_tree_members, process, orphans)

    # -- ending ----------------------------------------------------------------------------

    async def end_tree(
        self, process: ManagedProcess, *, include_leader: bool = True, gentle: bool = True
    ) -> list[str]:
        """TERM the whole tree, wait ``kill_grace``, KILL what is left (only KILL when not
        ``gentle``), until nothing is left. Returns the processes other than the main one
        that were found, as ``name (pid N)``."""
        ended: dict[int, str] = {}
        if gentle:
            members = await self._scan(process)
            _describe(ended, members.values())
            process.signal_group(signal.SIGTERM)
            for member in members.values():
                with contextlib.suppress(psutil.Error):
                    member.terminate()
            # One grace period for the whole tree, not one per part of it.
            deadline = time.monotonic() + self.kill_grace
            try:
                if include_leader and process.running:
                    await asyncio.wait_for(process.exited.wait(), self.kill_grace)
                left = max(0.0, deadline - time.monotonic())
                if process.cgroup is not None:
                    if not await asyncio.to_thread(
                        watchdog_module.wait_cgroup_empty, process.cgroup, left
                    ):
                        raise TimeoutError
                elif members:
                    await asyncio.to_thread(_wait_gone, list(members.values()), left)
            except TimeoutError:
                pass
        await self._kill_until_empty(process, ended)
        return list(ended.values())

    async def _kill_until_empty(self, process: ManagedProcess, ended: dict[int, str]) -> None:
        # A scan and a kill are not atomic: a process can fork between the two. In a
        # cgroup the kernel closes that gap; elsewhere every member is stopped before it
        # is killed, and the scan is repeated until it finds nothing (bounded).
        for round_number in range(_KILL_ROUNDS):
            if process.cgroup is not None:
                watchdog_module.cgroup_kill(process.cgroup)
            process.signal_group(signal.SIGKILL)
            members = await self._scan(process)
            if not members and (
                process.cgroup is None or not watchdog_module.cgroup_pids(process.cgroup)
            ):
                break
            _describe(ended, members.values())
            if members:
                await asyncio.to_thread(watchdog_module.kill_trees, list(members))
            self._orphans()  # reaps the orphans just killed
            await asyncio.sleep(0.005 * (round_number + 1))
        else:
            log.warning("processes of %s survived %d kill rounds", process.pid, _KILL_ROUNDS)

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
        orphans = self._orphans() or set()
        if orphans:
            await asyncio.to_thread(watchdog_module.kill_trees, orphans)
            self._orphans()
        if self.containment.cgroup is not None:
            await asyncio.to_thread(watchdog_module.end_cgroup, self.containment.cgroup)
        self.stop_watchdog()

    def kill_all_now(self) -> None:
        """Synchronous last resort (signal handlers): SIGKILL every group we own."""
        if self.containment.cgroup is not None:
            watchdog_module.cgroup_kill(self.containment.cgroup)
        # The trees first, while their main processes still hold them together (once a
        # main process dies, its detached descendants scatter to the next subreaper).
        with contextlib.suppress(Exception):
            watchdog_module.kill_trees([p.pid for p in self.live] + list(self._orphans() or ()))
        for process in list(self.live):
            process.signal_group(signal.SIGKILL)
        with contextlib.suppress(Exception):
            watchdog_module.kill_marked(self.instance)

    # -- watchdog --------------------------------------------------------------------------

    def _start_watchdog(self) -> None:
        try:
            watchdog = subprocess.Popen(
                [
                    sys.executable,
                    "-u",
                    str(Path(watchdog_module.__file__)),
                    self.instance,
                    self.containment.cgroup or "",
                ],
                stdin=subprocess.PIPE,
                # Never written: it closes when the watchdog dies, which wakes the server.
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            self.watchdog_error = f"watchdog not started: {exc}"
            log.warning("%s", self.watchdog_error)
            return
        DIRECT_CHILDREN.add(watchdog.pid)
        self._watchdog = watchdog
        self.watchdog_error = None
        for process in list(self.live):
            self._watch(f"+{process.pid}")
        self._ensure_watchdog_monitor()

    def _ensure_watchdog_monitor(self) -> None:
        watchdog = self._watchdog
        if watchdog is None or watchdog.stdout is None or self._watchdog_monitored == watchdog.pid:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop yet: the first spawn sets the monitor up
        loop.add_reader(watchdog.stdout.fileno(), self._watchdog_gone, watchdog)
        self._watchdog_monitored = watchdog.pid

    def _watchdog_gone(self, watchdog: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(Exception):
            assert watchdog.stdout is not None
            asyncio.get_running_loop().remove_reader(watchdog.stdout.fileno())
        if watchdog is not self._watchdog or self._closing:
            return
        self._restart_watchdog("its pipe closed")

    def _restart_watchdog(self, why: str) -> None:
        old, self._watchdog = self._watchdog, None
        code: int | None = None
        if old is not None:
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                old.kill()
                code = old.wait(timeout=2)
            for pipe in (old.stdin, old.stdout):
                with contextlib.suppress(OSError):
                    if pipe is not None:
                        pipe.close()
            forget_child(old.pid)
        now = time.monotonic()
        recent = [t for t in self._restart_times if now - t < 60][-4:]
        self._restart_times = [*recent, now]
        if len(self._restart_times) > 4:
            # Something kills it as fast as it starts: say so rather than loop.
            self.watchdog_error = (
                f"the watchdog died 5 times within 60 s (last: {why}, exit code {code}); "
                "not restarted again: if the server is killed now, its children survive it"
            )
            log.error("%s", self.watchdog_error)
            return
        self.watchdog_restarts += 1
        self._start_watchdog()
        log.warning(
            "the watchdog (pid %s) died (%s, exit code %s); started a new one (pid %s)",
            old.pid if old else None,
            why,
            code,
            self._watchdog.pid if self._watchdog else None,
        )

    def _watch(self, line: str) -> None:
        if self._watchdog is None or self._watchdog.stdin is None:
            return
        try:
            self._watchdog.stdin.write(line.encode() + b"\n")
            self._watchdog.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            if not self._closing:
                self._restart_watchdog("writing to it failed")

    def stop_watchdog(self) -> None:
        self._closing = True
        if self._watchdog is None:
            return
        watchdog, self._watchdog = self._watchdog, None
        with contextlib.suppress(Exception):
            assert watchdog.stdout is not None
            asyncio.get_running_loop().remove_reader(watchdog.stdout.fileno())
        with contextlib.suppress(OSError, ValueError):
            if watchdog.stdin:
                watchdog.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            watchdog.wait(timeout=5)
        with contextlib.suppress(OSError):
            if watchdog.stdout:
                watchdog.stdout.close()
        forget_child(watchdog.pid)

    @property
    def watchdog_pid(self) -> int | None:
        """The live watchdog's pid; a dead one is replaced first (and counted)."""
        if self._watchdog is not None and self._watchdog.poll() is not None and not self._closing:
            self._restart_watchdog(f"found dead with exit code {self._watchdog.returncode}")
        return self._watchdog.pid if self._watchdog else None


def _tree_members(process: ManagedProcess, orphans: set[int]) -> dict[int, psutil.Process]:
    """The live members of ``process`` other than its main process: the processes in its
    cgroup, or else its descendants and the processes carrying its owner mark; plus the
    given orphans and their descendants."""
    members: dict[int, psutil.Process] = {}
    roots = list(orphans)
    if process.cgroup is not None:
        for pid in watchdog_module.cgroup_pids(process.cgroup):
            with contextlib.suppress(psutil.Error):
                members[pid] = psutil.Process(pid)
    else:
        roots.append(process.pid)
        for marked in watchdog_module.marked_processes(lambda owner: owner == process.owner):
            members.setdefault(marked.pid, marked)
    if roots:
        for pid in watchdog_module.descendants(roots, watchdog_module.children_map()):
            if pid not in members:
                with contextlib.suppress(psutil.Error):
                    members[pid] = psutil.Process(pid)
    members.pop(process.pid, None)
    return {pid: m for pid, m in members.items() if _alive(m)}


def _describe(ended: dict[int, str], members: Any) -> None:
    for member in members:
        if member.pid not in ended:
            try:
                ended[member.pid] = f"{member.name()} (pid {member.pid})"
            except psutil.Error:
                ended[member.pid] = f"pid {member.pid}"


def describe_ended(names: list[str]) -> str:
    """``names`` for a note: the first few, then how many more."""
    shown = ", ".join(names[:_NAMES_IN_NOTE])
    if len(names) > _NAMES_IN_NOTE:
        shown += f" and {len(names) - _NAMES_IN_NOTE} more"
    return shown


def _children_of(pid: int) -> list[int]:
    """Direct children of ``pid``, from /proc (each thread lists the children it forked,
    and a subreaper's adopted orphans)."""
    children: list[int] = []
    paths = glob.glob(f"/proc/{pid}/task/*/children")
    if not paths:
        with contextlib.suppress(psutil.Error):
            return [c.pid for c in psutil.Process(pid).children()]
    for path in paths:
        with contextlib.suppress(OSError, ValueError), open(path, encoding="ascii") as listed:
            children.extend(int(word) for word in listed.read().split())
    return children


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False


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


# Runs first in a command that gets a cgroup: moves the shell into it, then becomes the
# command (``$0`` is the cgroup's ``cgroup.procs``). Should the move fail, the command
# still runs, held by the weaker nets.
_JOIN_CGROUP = '{ echo $$ > "$0"; } 2>/dev/null; exec "$@"'

# Runs in the new session before the real program. Flags: ``s`` makes it a child
# subreaper (kept across exec, so orphans of the command's descendants stay in its tree);
# ``t`` makes the PTY (fd 0) the controlling terminal, which Ctrl-C, job control and
# programs that open /dev/tty need. Done in a helper process because doing it between
# fork and exec (preexec_fn) is unsafe in a threaded server.
_LAUNCH_HELPER = (
    "import os, sys\n"
    "if 's' in sys.argv[1]:\n"
    "    import ctypes; ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)\n"
    "if 't' in sys.argv[1]:\n"
    "    import fcntl, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])"
)


def _bash_for_limits() -> str:
    return "/bin/bash" if os.path.exists("/bin/bash") else "bash"


def new_instance_id() -> str:
    me = psutil.Process()
    return f"{me.pid}.{int(me.create_time() * 1000)}.{os.urandom(4).hex()}"

"""Finding and ending processes the server started, even after the server is gone.

Every child carries ``TERMINAL_TOOLS_OWNER=<instance>:<n>`` in its environment. This file
is both a library (the scans below) and a tiny program: the server starts it with a pipe
on its stdin and writes ``+PGID`` / ``-PGID`` lines as process groups come and go. When
the pipe closes (the server exited or was killed, even with SIGKILL) the watchdog kills
the groups still registered and every process still marked with the server's instance,
then exits. A server that starts later reaps only what a registered, dead instance of
the same user provably owned (see the registry below). The watchdog runs in its own
session so that a client killing the server's process group does not take it down first.

Run as a script it must not import the ``terminal_tools`` package (it may not be on
``sys.path``); it needs only the standard library and psutil.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import sys
import tempfile

import psutil

OWNER_ENV = "TERMINAL_TOOLS_OWNER"


def instance_of(owner: str) -> str:
    return owner.split(":", 1)[0]


def marked_processes(predicate: object) -> list[psutil.Process]:
    """Processes whose owner mark satisfies ``predicate(owner) -> bool``."""
    found = []
    me = os.getpid()
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        try:
            owner = proc.environ().get(OWNER_ENV)
        except (psutil.Error, OSError):
            continue
        if owner and predicate(owner):  # type: ignore[operator]
            found.append(proc)
    return found


def _kill(procs: list[psutil.Process]) -> int:
    """SIGKILL each process; returns how many were signalled."""
    count = 0
    for proc in procs:
        try:
            proc.kill()
            count += 1
        except psutil.Error:
            pass
    return count


def kill_marked(instance: str) -> int:
    """SIGKILL every process marked with ``instance``; returns how many were signalled."""
    return _kill(marked_processes(lambda owner: instance_of(owner) == instance))


def _parts(instance: str) -> tuple[int, int] | None:
    try:
        pid_text, created_text, _ = instance.split(".", 2)
        return int(pid_text), int(created_text)
    except ValueError:
        return None


def instance_alive(instance: str) -> bool:
    """Whether the server that created ``instance`` (``pid.createtime_ms.token``) runs."""
    parts = _parts(instance)
    if parts is None:
        return False
    try:
        return int(psutil.Process(parts[0]).create_time() * 1000) == parts[1]
    except psutil.Error:
        return False


# -- the instance registry: which servers of this user ran, so a successor may reap ---------
#
# A running server registers its instance id as an empty file in a per-user folder and
# removes it when it ends cleanly. A server that starts reaps only what a *registered*
# instance provably owned: the instance is dead, the process carries its mark, runs as
# this user and was created after that instance started. Servers that use another
# folder (another user, a test's private one) never touch each other's processes.


def default_state_dir() -> str:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(tempfile.gettempdir(), f"terminal-tools-{uid}")


def _private_dir(path: str) -> str | None:
    """``path`` as a folder only this user can write (created if missing), else None."""
    with contextlib.suppress(FileExistsError, OSError):
        os.makedirs(path, mode=0o700, exist_ok=True)
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode):
        return None
    if hasattr(os, "getuid") and (
        info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    ):
        return None
    return path


def register_instance(state_dir: str, instance: str) -> bool:
    folder = _private_dir(state_dir)
    if folder is None or _parts(instance) is None:
        return False
    try:
        with open(os.path.join(folder, instance), "x"):
            return True
    except OSError:
        return False


def unregister_instance(state_dir: str, instance: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(state_dir, instance))


def registered_instances(state_dir: str) -> list[str]:
    folder = _private_dir(state_dir)
    if folder is None:
        return []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [name for name in names if _parts(name) is not None]


def owned_by_dead(proc: psutil.Process, instance: str) -> bool:
    """Whether ``proc`` (marked with ``instance``) provably belongs to that instance:
    same user as us, and created after the instance's server started."""
    parts = _parts(instance)
    if parts is None:
        return False
    try:
        if hasattr(os, "getuid") and proc.uids().real != os.getuid():
            return False
        return proc.create_time() * 1000 >= parts[1] - 1
    except psutil.Error:
        return False


def reap_predecessors(current_instance: str, state_dir: str) -> int:
    """Kill what registered servers of this user left when they died without cleaning up
    (crash, SIGKILL of both server and watchdog); forget those servers."""
    dead = {
        instance
        for instance in registered_instances(state_dir)
        if instance != current_instance and not instance_alive(instance)
    }
    if not dead:
        return 0
    found = marked_processes(lambda owner: instance_of(owner) in dead)
    killed = _kill([proc for proc in found if owned_by_dead(proc, instance_of(_owner(proc) or ""))])
    for instance in dead:
        unregister_instance(state_dir, instance)
    return killed


def _owner(proc: psutil.Process) -> str | None:
    try:
        return proc.environ().get(OWNER_ENV)
    except (psutil.Error, OSError):
        return None


def main() -> None:
    instance = sys.argv[1]
    # Only the pipe closing ends us: terminal hangups and Ctrl-C aimed at the server's
    # terminal must not stop the watchdog before it has done its job.
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    groups: set[int] = set()
    for raw in sys.stdin.buffer:
        line = raw.strip()
        if not line:
            continue
        try:
            number = int(line[1:])
        except ValueError:
            continue
        if line.startswith(b"+"):
            groups.add(number)
        elif line.startswith(b"-"):
            groups.discard(number)
    for pgid in groups:
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGKILL)
    kill_marked(instance)


if __name__ == "__main__":
    main()

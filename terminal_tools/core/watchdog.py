"""Finding and ending processes the server started, even after the server is gone.

Every child carries ``TERMINAL_TOOLS_OWNER=<instance>:<n>`` in its environment. This file
is both a library (the scans below) and a tiny program: the server starts it with a pipe
on its stdin and writes ``+PGID`` / ``-PGID`` lines as process groups come and go. When
the pipe closes (the server exited or was killed, even with SIGKILL) the watchdog kills
the groups still registered and every process still marked with the server's instance,
then exits. It runs in its own session so that a client killing the server's process
group does not take the watchdog down first.

Run as a script it must not import the ``terminal_tools`` package (it may not be on
``sys.path``); it needs only the standard library and psutil.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

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


def instance_alive(instance: str) -> bool:
    """Whether the server that created ``instance`` (``pid.createtime_ms.token``) runs."""
    try:
        pid_text, created_text, _ = instance.split(".", 2)
        proc = psutil.Process(int(pid_text))
        return int(proc.create_time() * 1000) == int(created_text)
    except (ValueError, psutil.Error):
        return False


def reap_predecessors(current_instance: str) -> int:
    """Kill processes left by servers that died without cleaning up (crash, SIGKILL)."""
    dead: dict[str, bool] = {}

    def abandoned(owner: str) -> bool:
        instance = instance_of(owner)
        if instance == current_instance:
            return False
        if instance not in dead:
            dead[instance] = not instance_alive(instance)
        return dead[instance]

    return _kill(marked_processes(abandoned))


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

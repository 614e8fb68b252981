"""Finding and ending processes the server started, even after the server is gone.

Three nets, strongest first. Where the server may create cgroups (cgroup v2), every
command runs in a cgroup of its own under ``terminal-tools.<instance>``: a child cannot
leave it, and one write to ``cgroup.kill`` ends everything in it, including processes
forked while it is being ended. The processes the server registers are walked as trees.
Every child also carries ``TERMINAL_TOOLS_OWNER=<instance>:<n>`` in its environment (a
child can strip it, so this net is the weakest).

This file is both a library (the scans below) and a tiny program: the server starts it with
a pipe on its stdin and writes ``+PID`` / ``-PID`` lines as commands (each the leader of
its own process group) come and go. When the pipe closes (the server exited or was
killed, even with SIGKILL) the watchdog kills the instance's cgroups, the trees and groups
still registered and every process still marked with the server's instance, then exits.
A server that starts later reaps only what a registered, dead instance of the same user
provably owned (see the registry below). The watchdog runs in its own session so that a
client killing the server's process group does not take it down first.

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
import time
from collections.abc import Iterable

import psutil

OWNER_ENV = "TERMINAL_TOOLS_OWNER"
CGROUP_PREFIX = "terminal-tools."


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
    killed = end_dead_cgroups(dead)
    found = marked_processes(lambda owner: instance_of(owner) in dead)
    killed += _kill(
        [proc for proc in found if owned_by_dead(proc, instance_of(_owner(proc) or ""))]
    )
    for instance in dead:
        unregister_instance(state_dir, instance)
    return killed


def _owner(proc: psutil.Process) -> str | None:
    try:
        return proc.environ().get(OWNER_ENV)
    except (psutil.Error, OSError):
        return None


# -- cgroups -------------------------------------------------------------------------------


def cgroup2_mount() -> str | None:
    """Where the cgroup v2 hierarchy is mounted (``/sys/fs/cgroup``, or
    ``/sys/fs/cgroup/unified`` on hybrid systems); None without one."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as lines:
            for line in lines:
                fields, _, rest = line.partition(" - ")
                parts = fields.split()
                if rest.split(" ", 1)[0] == "cgroup2" and len(parts) > 4 and parts[3] == "/":
                    return parts[4]
    except OSError:
        pass
    return None


def own_cgroup_dir() -> str | None:
    """The directory of the cgroup v2 this process belongs to."""
    mount = cgroup2_mount()
    if mount is None:
        return None
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as lines:
            for line in lines:
                if line.startswith("0::"):
                    path = os.path.join(mount, line[3:].strip().lstrip("/"))
                    return os.path.normpath(path)
    except OSError:
        pass
    return None


def _cgroup_dirs(path: str) -> list[str]:
    """``path`` and every cgroup below it, deepest first (the order rmdir needs)."""
    found = []
    for root, _dirs, _files in os.walk(path):
        found.append(root)
    return sorted(found, key=lambda d: d.count(os.sep), reverse=True)


def cgroup_pids(path: str) -> list[int]:
    """Every process in the cgroup at ``path`` and below it (zombies are not listed)."""
    pids: list[int] = []
    for folder in _cgroup_dirs(path):
        procs_file = os.path.join(folder, "cgroup.procs")
        with contextlib.suppress(OSError, ValueError), open(procs_file, encoding="ascii") as procs:
            pids.extend(int(line) for line in procs if line.strip())
    return pids


def cgroup_populated(path: str) -> bool:
    try:
        with open(os.path.join(path, "cgroup.events"), encoding="ascii") as events:
            return "populated 1" in events.read()
    except OSError:
        return bool(cgroup_pids(path))


def cgroup_kill(path: str) -> None:
    """SIGKILL everything in the cgroup, processes forked meanwhile included. Kernels
    before 5.14 have no ``cgroup.kill``: freeze the cgroup, kill its members, thaw it."""
    try:
        with open(os.path.join(path, "cgroup.kill"), "w", encoding="ascii") as kill:
            kill.write("1")
        return
    except FileNotFoundError:
        pass
    except OSError:
        return  # the cgroup is gone
    frozen = _write(os.path.join(path, "cgroup.freeze"), "1")
    for pid in cgroup_pids(path):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    if frozen:
        _write(os.path.join(path, "cgroup.freeze"), "0")


def _write(path: str, text: str) -> bool:
    try:
        with open(path, "w", encoding="ascii") as target:
            target.write(text)
        return True
    except OSError:
        return False


def wait_cgroup_empty(path: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while cgroup_populated(path):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


def remove_cgroup(path: str) -> bool:
    """rmdir ``path`` and the cgroups below it; False if one still holds processes."""
    removed = True
    for folder in _cgroup_dirs(path):
        try:
            os.rmdir(folder)
        except FileNotFoundError:
            pass
        except OSError:
            removed = False
    return removed


def end_cgroup(path: str, timeout: float = 2.0) -> None:
    """Kill everything in the cgroup and remove it once it is empty."""
    if not os.path.isdir(path):
        return
    cgroup_kill(path)
    wait_cgroup_empty(path, timeout)
    remove_cgroup(path)


def end_dead_cgroups(instances: Iterable[str]) -> int:
    """End the cgroups of the given dead instances (under our own cgroup, where a server
    started from the same place made them); returns how many processes they held."""
    parent = own_cgroup_dir()
    if parent is None:
        return 0
    count = 0
    for instance in instances:
        path = os.path.join(parent, CGROUP_PREFIX + instance)
        if os.path.isdir(path):
            count += len(cgroup_pids(path))
            end_cgroup(path)
    return count


# -- process trees ---------------------------------------------------------------------------


def children_map() -> dict[int, list[int]]:
    """Every process's children, from one pass over the process table (walking each
    process's children separately rereads the whole table each time)."""
    children: dict[int, list[int]] = {}
    for proc in psutil.process_iter(["ppid"]):
        ppid = proc.info.get("ppid")
        if ppid is not None:
            children.setdefault(ppid, []).append(proc.pid)
    return children


def descendants(roots: Iterable[int], children: dict[int, list[int]]) -> set[int]:
    """``roots`` and all their descendants."""
    found: set[int] = set()
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.add(pid)
        todo.extend(children.get(pid, ()))
    return found


def kill_trees(pids: Iterable[int]) -> None:
    """SIGKILL each process and all its descendants. Every member is stopped first, and
    the tree walked again until it stops growing: a stopped process cannot fork, so no
    child born during the walk escapes it."""
    roots = set(pids)
    stopped: set[int] = set()
    me = os.getpid()
    for _ in range(20):
        new = descendants(roots | stopped, children_map()) - stopped - {me}
        if not new:
            break
        for pid in new:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGSTOP)
        stopped |= new
    for pid in stopped:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def main() -> None:
    instance = sys.argv[1]
    cgroup = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None
    # Only the pipe closing ends us: terminal hangups and Ctrl-C aimed at the server's
    # terminal must not stop the watchdog before it has done its job.
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    leaders: set[int] = set()
    for raw in sys.stdin.buffer:
        line = raw.strip()
        if not line:
            continue
        try:
            number = int(line[1:])
        except ValueError:
            continue
        if line.startswith(b"+"):
            leaders.add(number)
        elif line.startswith(b"-"):
            leaders.discard(number)
    if cgroup is not None:
        cgroup_kill(cgroup)
    kill_trees(leaders)
    for pgid in leaders:
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGKILL)
    kill_marked(instance)
    if cgroup is not None:
        wait_cgroup_empty(cgroup, 2.0)
        remove_cgroup(cgroup)


if __name__ == "__main__":
    main()

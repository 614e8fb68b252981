"""From a command string to what will be spawned: argv, shell, cwd and environment.

Used by the launch gate (``launch.py``) for ``terminal_exec`` and ``terminal_job_start``,
so that both route, validate and prepare commands identically. Every problem found here
is reported before anything is started.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from ..errors import InvalidInput, NotFound
from .analysis import Analysis, analyze
from .destructive import destructive_warning
from .processes import Limits
from .redact import Redactor
from .shell import EnvError, Platform, Shell, ShellError, child_environment, resolve_shell

T = TypeVar("T")


@dataclass(frozen=True)
class CommandPlan:
    command: str
    argv: list[str]
    shell_kind: str  # bash | sh | powershell | cmd | direct
    auto_shell: bool
    analysis: Analysis
    cwd: str
    env: dict[str, str]
    warning: str | None
    limits: Limits | None
    redactor: Redactor | None = None


def resolve_cwd(cwd: str | None, default: str) -> str:
    """``cwd`` made absolute against ``default``; it must be an existing directory."""
    if cwd is not None and "\0" in cwd:
        raise InvalidInput("cwd contains a NUL byte")
    path = default if not cwd else os.path.join(default, os.path.expanduser(cwd))
    path = os.path.normpath(path)
    if not os.path.exists(path):
        raise NotFound(f"working directory does not exist: {path}")
    if not os.path.isdir(path):
        raise InvalidInput(f"working directory is not a directory: {path}")
    return path


def _os_command_limit() -> int:
    """The longest command, in bytes, that can be started at all. A command run through a
    shell is one argument of ``bash -c``: Linux refuses any single argument of
    MAX_ARG_STRLEN (32 pages, 131,072 bytes) or more with E2BIG; macOS bounds the whole
    argument list by ARG_MAX; Windows bounds the command line at 32,767 characters."""
    if sys.platform.startswith("linux"):
        return 131_072 - 1
    if os.name == "nt":
        return 32_767
    try:
        return max(4096, os.sysconf("SC_ARG_MAX") // 2)  # half: the environment shares it
    except (ValueError, OSError, AttributeError):
        return 131_072 - 1


MAX_COMMAND_BYTES = _os_command_limit()

# Analysing a command (and matching it against a policy) costs about 2 µs a byte, more on
# deeply nested input: below this size it is cheaper to do it on the event loop than to
# hand it to a worker thread; above it, a thread keeps every other call answering.
INLINE_ANALYSIS_BYTES = 2048


def check_command_size(command: str) -> None:
    """Refuse a command no OS could run before any time is spent on it."""
    size = len(command) if len(command) * 4 <= MAX_COMMAND_BYTES else len(command.encode())
    if size > MAX_COMMAND_BYTES:
        raise InvalidInput(
            f"command is {size:,} bytes; the longest command this OS can start is "
            f"{MAX_COMMAND_BYTES:,} bytes. Put the script in a file and run the file, or "
            "pass the data on stdin"
        )


async def off_loop_if_large(size: int, fn: Callable[[], T]) -> T:
    """``fn()`` on the event loop when its input is small, in a worker thread when not."""
    if size <= INLINE_ANALYSIS_BYTES:
        return fn()
    return await asyncio.to_thread(fn)


def analyze_command(command: str) -> Analysis:
    """The parsed command; a command no program could receive is refused here."""
    if not command or not command.strip():
        raise InvalidInput("command is empty")
    if "\0" in command:
        raise InvalidInput("command contains a NUL byte, which no program can receive")
    check_command_size(command)
    analysis = analyze(command)
    if analysis.error:
        raise InvalidInput(analysis.error)
    return analysis


def plan_command(
    command: str,
    *,
    cwd: str,
    env: Mapping[str, object] | None,
    shell: bool | str,
    base_env: Mapping[str, str],
    owner: str,
    limits: Limits | None = None,
    platform: Platform | None = None,
    redactor: Redactor | None = None,
    analysis: Analysis | None = None,
    policy_warnings: tuple[str, ...] = (),
) -> CommandPlan:
    """Route ``command`` (direct or through a shell) and prepare its environment. The
    policy is not consulted here: the launch gate decides before calling this."""
    if analysis is None:
        analysis = analyze_command(command)
    try:
        child_env = child_environment(base_env, env, owner=owner)
    except EnvError as exc:
        raise InvalidInput(str(exc)) from None
    try:
        requested = shell if isinstance(shell, str) and shell else None
        chosen: Shell | None = (
            resolve_shell(requested, platform) if (shell or analysis.needs_shell) else None
        )
    except ShellError as exc:
        raise InvalidInput(str(exc)) from None
    warning = destructive_warning(analysis)
    if policy_warnings:
        warning = "; ".join(([warning] if warning else []) + list(policy_warnings))
    if chosen is None and analysis.argv:
        program = _find_program(analysis.argv[0], cwd, child_env.get("PATH"))
        argv, kind, auto_shell = [program, *analysis.argv[1:]], "direct", False
    else:
        if chosen is None:  # defensive: a plain command the analyser could not split
            chosen = resolve_shell(None, platform)
        argv, kind, auto_shell = chosen.command_argv(command), chosen.kind, not shell
    return CommandPlan(
        command, argv, kind, auto_shell, analysis, cwd, child_env, warning, limits, redactor
    )


def _find_program(name: str, cwd: str, path: str | None) -> str:
    if "/" in name or (os.name == "nt" and "\\" in name):
        candidate = os.path.join(cwd, os.path.expanduser(name))
        if not os.path.exists(candidate):
            raise NotFound(f"command not found: {name} (no such file relative to {cwd})")
        if os.path.isdir(candidate):
            raise InvalidInput(f"not executable: {name} is a directory")
        if not os.access(candidate, os.X_OK):
            raise InvalidInput(
                f"not executable: {name} (permission denied; chmod +x it or run it with its "
                "interpreter)"
            )
        return candidate
    found = shutil.which(name, path=path)
    if found is None:
        hint = "check the spelling, or give the full path"
        if path is not None and len(path.split(os.pathsep)) < 4:
            hint += "; the server's PATH is short (see the --login-path option)"
        raise NotFound(f"command not found: {name} ({hint})")
    return found

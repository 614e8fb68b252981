"""From a command string to what will be spawned: argv, shell, cwd and environment.

Shared by ``terminal_exec`` and ``terminal_job_start`` so that both route, validate and
prepare commands identically. Every problem found here is reported before anything is
started.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import UserError
from .analysis import Analysis, analyze
from .destructive import destructive_warning
from .policy import Policy
from .processes import Limits
from .redact import Redactor
from .shell import EnvError, Platform, Shell, ShellError, child_environment, resolve_shell


class PlanError(UserError):
    pass


class PolicyBlocked(PlanError):
    """Refused by the command policy (reported with ``blocked: true``)."""


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
        raise PlanError("cwd contains a NUL byte")
    path = default if not cwd else os.path.join(default, os.path.expanduser(cwd))
    path = os.path.normpath(path)
    if not os.path.exists(path):
        raise PlanError(f"working directory does not exist: {path}")
    if not os.path.isdir(path):
        raise PlanError(f"working directory is not a directory: {path}")
    return path


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
    policy: Policy | None = None,
    redactor: Redactor | None = None,
) -> CommandPlan:
    if not command or not command.strip():
        raise PlanError("command is empty")
    if "\0" in command:
        raise PlanError("command contains a NUL byte, which no program can receive")
    analysis = analyze(command)
    if analysis.error:
        raise PlanError(analysis.error)
    try:
        child_env = child_environment(base_env, env, owner=owner)
    except EnvError as exc:
        raise PlanError(str(exc)) from None
    try:
        requested = shell if isinstance(shell, str) and shell else None
        chosen: Shell | None = (
            resolve_shell(requested, platform) if (shell or analysis.needs_shell) else None
        )
    except ShellError as exc:
        raise PlanError(str(exc)) from None
    warning = destructive_warning(analysis)
    if policy is not None:
        decision = policy.check(command, analysis)
        if decision.blocked:
            raise PolicyBlocked(decision.message or "blocked by policy")
        if decision.warnings:
            warning = "; ".join(([warning] if warning else []) + list(decision.warnings))
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
            raise PlanError(f"command not found: {name} (no such file relative to {cwd})")
        if os.path.isdir(candidate):
            raise PlanError(f"not executable: {name} is a directory")
        if not os.access(candidate, os.X_OK):
            raise PlanError(
                f"not executable: {name} (permission denied; chmod +x it or run it with its "
                "interpreter)"
            )
        return candidate
    found = shutil.which(name, path=path)
    if found is None:
        hint = "check the spelling, or give the full path"
        if path is not None and len(path.split(os.pathsep)) < 4:
            hint += "; the server's PATH is short (see the --login-path option)"
        raise PlanError(f"command not found: {name} ({hint})")
    return found

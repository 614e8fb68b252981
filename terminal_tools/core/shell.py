"""Which interpreter runs shell syntax, and the environment children start with.

The resolver is a pure function of the platform facts it is given, so every branch
(including Windows) is unit-tested on any machine.

POSIX: ``/bin/bash``, else ``bash`` on PATH, else ``/bin/sh`` (reported as ``sh``).
Windows: Git Bash (``TERMINAL_TOOLS_GIT_BASH``, the usual install folders, PATH but never
``System32\\bash.exe`` or the WindowsApps launcher, which start WSL), then PowerShell
(``pwsh``, then Windows PowerShell), then ``cmd``.
zsh is refused everywhere: its word splitting, globbing and option defaults differ from
bash enough that commands written for bash misbehave silently.
"""

from __future__ import annotations

import ntpath
import os
import posixpath
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

ShellKind = Literal["bash", "sh", "powershell", "cmd"]

GIT_BASH_ENV = "TERMINAL_TOOLS_GIT_BASH"
OWNER_ENV = "TERMINAL_TOOLS_OWNER"


class ShellError(ValueError):
    """A requested shell that cannot or must not be used."""


@dataclass(frozen=True)
class Shell:
    kind: ShellKind
    path: str

    def command_argv(self, command: str) -> list[str]:
        if self.kind == "powershell":
            return [self.path, "-NoLogo", "-NoProfile", "-NonInteractive", "-Command", command]
        if self.kind == "cmd":
            return [self.path, "/d", "/s", "/c", command]
        return [self.path, "-c", command]


@dataclass(frozen=True)
class Platform:
    """The facts the resolver needs; tests build fake ones."""

    windows: bool
    environ: Mapping[str, str]
    is_file: Callable[[str], bool]
    which: Callable[[str, str | None], str | None]

    @classmethod
    def current(cls) -> Platform:
        return cls(
            windows=os.name == "nt",
            environ=os.environ,
            is_file=os.path.isfile,
            which=lambda name, path: shutil.which(name, path=path),
        )


_KINDS: dict[str, ShellKind] = {
    "bash": "bash",
    "sh": "sh",
    "dash": "sh",
    "ash": "sh",
    "pwsh": "powershell",
    "powershell": "powershell",
    "cmd": "cmd",
}


def shell_name(path_or_name: str) -> str:
    base = ntpath.basename(posixpath.basename(path_or_name)).lower()
    return base[:-4] if base.endswith(".exe") else base


def resolve_shell(requested: str | None = None, platform: Platform | None = None) -> Shell:
    """The shell to run shell syntax with; ``requested`` is a name or a path."""
    platform = platform or Platform.current()
    if requested:
        return _explicit(requested, platform)
    return _windows_default(platform) if platform.windows else _posix_default(platform)


def _explicit(requested: str, platform: Platform) -> Shell:
    name = shell_name(requested)
    if "zsh" in name:
        raise ShellError(
            f"zsh is not supported ({requested}): commands are run with bash semantics; "
            "omit `shell` to use bash, or pass a bash, sh, PowerShell or cmd path"
        )
    kind = _KINDS.get(name)
    if kind is None:
        raise ShellError(
            f"unsupported shell {requested!r}: use bash, sh, dash, pwsh, powershell or cmd"
        )
    has_dir = "/" in requested or "\\" in requested
    path = requested if has_dir else platform.which(requested, platform.environ.get("PATH"))
    if not path or not platform.is_file(path):
        raise ShellError(f"shell not found: {requested}")
    if platform.windows and kind == "bash" and _is_wsl_launcher(path):
        raise ShellError(f"{path} starts WSL, not Git Bash; pass Git Bash's bash.exe")
    return Shell(kind, path)


def _posix_default(platform: Platform) -> Shell:
    if platform.is_file("/bin/bash"):
        return Shell("bash", "/bin/bash")
    found = platform.which("bash", platform.environ.get("PATH"))
    if found:
        return Shell("bash", found)
    return Shell("sh", "/bin/sh")


def _windows_default(platform: Platform) -> Shell:
    """Git Bash, then PowerShell, then cmd (what every Windows machine has)."""
    env = platform.environ
    system_root = env.get("SystemRoot", r"C:\Windows")
    return (
        _git_bash(platform)
        or _powershell(platform, system_root)
        or Shell("cmd", env.get("ComSpec") or ntpath.join(system_root, "System32", "cmd.exe"))
    )


def _git_bash(platform: Platform) -> Shell | None:
    env = platform.environ
    override = env.get(GIT_BASH_ENV)
    if override and platform.is_file(override):
        return Shell("bash", override)
    roots = [env.get(name) for name in ("ProgramFiles", "ProgramW6432", "ProgramFiles(x86)")]
    candidates = [ntpath.join(root, "Git", "bin", "bash.exe") for root in roots if root]
    if env.get("LOCALAPPDATA"):
        candidates.append(ntpath.join(env["LOCALAPPDATA"], "Programs", "Git", "bin", "bash.exe"))
    for candidate in candidates:
        if platform.is_file(candidate):
            return Shell("bash", candidate)
    on_path = platform.which("bash", env.get("PATH"))
    if on_path and not _is_wsl_launcher(on_path):
        return Shell("bash", on_path)
    return None


def _powershell(platform: Platform, system_root: str) -> Shell | None:
    for name in ("pwsh", "powershell"):
        found = platform.which(name, platform.environ.get("PATH"))
        if found:
            return Shell("powershell", found)
    legacy = ntpath.join(system_root, "System32", "WindowsPowerShell", "v1.0", "powershell.exe")
    return Shell("powershell", legacy) if platform.is_file(legacy) else None


def _is_wsl_launcher(path: str) -> bool:
    lowered = path.replace("/", "\\").lower()
    return lowered.endswith("\\system32\\bash.exe") or "\\windowsapps\\" in lowered


# -- environment -----------------------------------------------------------------------

# Defaults that make one-shot commands fail fast instead of waiting for a human.
NONINTERACTIVE_DEFAULTS = {
    "GIT_TERMINAL_PROMPT": "0",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "DEBIAN_FRONTEND": "noninteractive",
}
# In a PTY the agent can answer prompts, but a pager would still trap it.
INTERACTIVE_DEFAULTS = {"PAGER": "cat", "GIT_PAGER": "cat", "TERM": "xterm-256color"}


class EnvError(ValueError):
    pass


def child_environment(
    base: Mapping[str, str],
    overrides: Mapping[str, object] | None,
    *,
    owner: str,
    interactive: bool = False,
) -> dict[str, str]:
    """The environment of a child: ``base`` minus zsh state, plus hygiene, plus overrides.

    ``owner`` marks the process as ours (so a restarted server or the watchdog can find
    it); it is set last so that an agent cannot spoof or remove it.
    """
    env = {k: v for k, v in base.items() if k != "ZDOTDIR" and not k.startswith("ZSH_")}
    # Hygiene wins over the server's own environment (a user's PAGER=less would hang an
    # agent) but not over what the caller passes explicitly.
    env.update(INTERACTIVE_DEFAULTS if interactive else NONINTERACTIVE_DEFAULTS)
    if not any(env.get(k) for k in ("LC_ALL", "LC_CTYPE", "LANG")):
        env["LANG"] = "C.UTF-8"
    for key, value in (overrides or {}).items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            raise EnvError(f"invalid environment variable name: {key!r}")
        if not isinstance(value, str):
            raise EnvError(
                f"environment variable {key} must be a string, got {type(value).__name__}"
            )
        if "\0" in value:
            raise EnvError(f"environment variable {key} contains a NUL byte")
        env[key] = value
    env[OWNER_ENV] = owner
    return env


_PATH_MARK = "__TERMINAL_TOOLS_PATH__"


def login_path(shell_path: str, timeout: float = 5.0) -> str | None:
    """PATH as the user's login shell sets it, or ``None`` if it cannot be read.

    Runs ``SHELL -l -i -c 'printf ...'`` once, with stdin closed and a time limit; the
    value is framed by markers because interactive startup files may print text.
    """
    script = f'printf "{_PATH_MARK}%s{_PATH_MARK}" "$PATH"'
    try:
        done = subprocess.run(
            [shell_path, "-l", "-i", "-c", script],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            start_new_session=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(f"{_PATH_MARK}(.*?){_PATH_MARK}", done.stdout.decode(errors="replace"))
    return match.group(1) if match and match.group(1) else None

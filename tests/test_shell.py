"""The shell resolver on simulated platforms, and the child environment."""

from __future__ import annotations

import pytest

from terminal_tools.core.shell import (
    EnvError,
    Platform,
    ShellError,
    child_environment,
    resolve_shell,
)


def platform(windows: bool, files: set[str], on_path: dict[str, str],
             env: dict[str, str] | None = None) -> Platform:
    return Platform(windows=windows, environ=env or {"PATH": "x"},
                    is_file=lambda p: p in files, which=lambda name, path: on_path.get(name))


def test_posix_prefers_bin_bash() -> None:
    shell = resolve_shell(None, platform(False, {"/bin/bash"}, {"bash": "/usr/bin/bash"}))
    assert (shell.kind, shell.path) == ("bash", "/bin/bash")


def test_posix_falls_back_to_bash_on_path_then_sh() -> None:
    assert resolve_shell(None, platform(False, set(), {"bash": "/opt/bash"})).path == "/opt/bash"
    shell = resolve_shell(None, platform(False, set(), {}))
    assert (shell.kind, shell.path) == ("sh", "/bin/sh")


WIN_ENV = {"ProgramFiles": r"C:\Program Files", "SystemRoot": r"C:\Windows",
           "ComSpec": r"C:\Windows\System32\cmd.exe", "PATH": "x"}
GIT_BASH = r"C:\Program Files\Git\bin\bash.exe"


def test_windows_prefers_git_bash() -> None:
    shell = resolve_shell(None, platform(True, {GIT_BASH}, {}, WIN_ENV))
    assert (shell.kind, shell.path) == ("bash", GIT_BASH)


def test_windows_git_bash_override() -> None:
    env = dict(WIN_ENV, TERMINAL_TOOLS_GIT_BASH=r"D:\git\bin\bash.exe")
    shell = resolve_shell(None, platform(True, {r"D:\git\bin\bash.exe", GIT_BASH}, {}, env))
    assert shell.path == r"D:\git\bin\bash.exe"


def test_windows_never_uses_the_wsl_launcher() -> None:
    on_path = {"bash": r"C:\Windows\System32\bash.exe", "pwsh": r"C:\pwsh\pwsh.exe"}
    shell = resolve_shell(None, platform(True, set(), on_path, WIN_ENV))
    assert (shell.kind, shell.path) == ("powershell", r"C:\pwsh\pwsh.exe")
    with pytest.raises(ShellError, match="WSL"):
        resolve_shell(r"C:\Windows\System32\bash.exe",
                      platform(True, {r"C:\Windows\System32\bash.exe"}, {}, WIN_ENV))


def test_windows_powershell_then_cmd() -> None:
    legacy = r"C:\Windows\System32\WindowsPowerShell\v1.0\powershell.exe"
    assert resolve_shell(None, platform(True, {legacy}, {}, WIN_ENV)).kind == "powershell"
    shell = resolve_shell(None, platform(True, set(), {}, WIN_ENV))
    assert (shell.kind, shell.path) == ("cmd", r"C:\Windows\System32\cmd.exe")


@pytest.mark.parametrize("requested", ["zsh", "/bin/zsh", "/usr/local/bin/zsh-5.9",
                                       r"C:\msys\zsh.exe"])
def test_zsh_is_refused(requested: str) -> None:
    with pytest.raises(ShellError, match="zsh is not supported"):
        resolve_shell(requested, platform(False, {"/bin/zsh"}, {"zsh": "/bin/zsh"}))


@pytest.mark.parametrize("requested,kind", [("bash", "bash"), ("/bin/sh", "sh"),
                                            ("dash", "sh"), ("pwsh", "powershell"),
                                            ("cmd.exe", "cmd")])
def test_explicit_shells(requested: str, kind: str) -> None:
    files = {"/bin/sh", "/usr/bin/bash", "/usr/bin/dash", "/usr/bin/pwsh", "/c/cmd.exe"}
    on_path = {"bash": "/usr/bin/bash", "dash": "/usr/bin/dash", "pwsh": "/usr/bin/pwsh",
               "cmd.exe": "/c/cmd.exe"}
    assert resolve_shell(requested, platform(False, files, on_path)).kind == kind


def test_command_argv_per_shell() -> None:
    from terminal_tools.core.shell import Shell

    assert Shell("bash", "/bin/bash").command_argv("x") == ["/bin/bash", "-c", "x"]
    assert Shell("cmd", "cmd.exe").command_argv("x")[-2:] == ["/c", "x"]
    assert Shell("powershell", "pwsh").command_argv("x")[-2:] == ["-Command", "x"]


def test_child_environment() -> None:
    base = {"PATH": "/bin", "ZDOTDIR": "/z", "ZSH_THEME": "x", "PAGER": "less",
            "TERMINAL_TOOLS_OWNER": "spoof"}
    env = child_environment(base, {"FOO": "1", "TERMINAL_TOOLS_OWNER": "agent"}, owner="me:1")
    assert "ZDOTDIR" not in env and "ZSH_THEME" not in env
    assert env["PAGER"] == "cat" and env["GIT_TERMINAL_PROMPT"] == "0"
    assert env["DEBIAN_FRONTEND"] == "noninteractive" and env["LANG"] == "C.UTF-8"
    assert env["FOO"] == "1" and env["TERMINAL_TOOLS_OWNER"] == "me:1"
    assert child_environment({"LC_ALL": "de_DE.UTF-8"}, None, owner="o").get("LANG") is None


@pytest.mark.parametrize("overrides", [{"A": 1}, {"A": None}, {"": "x"}, {"A=B": "x"},
                                       {"A": "x\0y"}])
def test_bad_environment_values(overrides: dict) -> None:
    with pytest.raises(EnvError):
        child_environment({}, overrides, owner="o")

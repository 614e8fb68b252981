"""Command policy: what agents may run, decided on the parsed command.

A policy file (TOML) holds ``deny`` and ``warn`` rules, an optional allow list, and
switches. Rules match the programs in command position as the command analysis sees
them: through quoting (``r""m``, ``\\rm``, ``$'\\x72m'``), brace expansion, paths
(``/usr/bin/rm``), wrappers (``sudo``, ``env``, ``setsid``, ``flock``, ``xargs``,
``find -exec``...), and every script a shell reads from an argument (``bash -ec``),
from a here-document or here-string, or that ``eval``, ``trap``, ``watch``, ``alias``
and ``coproc`` run. An ``args`` regex sees the arguments after expansion, and also
with long options written as their short forms (``--recursive`` -> ``-r``).

Whenever the policy has rules that refuse (``deny`` rules or allow mode), it fails
closed on what it cannot read before the command runs: a program or arguments that
come from an expansion (``$(echo rm)``, ``rm "$@"``), a shell reading commands from a
pipe or a process substitution, variables that carry code (``BASH_ENV``,
``BASH_FUNC_*``, ``LD_PRELOAD``, ``PROMPT_COMMAND``...), and, unless a switch allows
it, a shell that reads commands typed into a terminal or written to a job's stdin.

A policy is a guard rail against mistakes, not a sandbox: a program allowed to run can
still do anything its permissions allow (``python -c "import shutil; ..."``, a script
file the agent wrote).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .analysis import (
    MAX_WRAPPERS,
    Analysis,
    SimpleCommand,
    analyze,
    is_descriptor_path,
    is_shell,
    reads_stdin_path,
    shell_input,
    unwrap,
    wraps_further,
)

# Builtins that only change the shell's own state or print: allowed in allow mode without
# being listed (they cannot run another program).
HARMLESS_BUILTINS = frozenset(
    [
        "cd",
        "pwd",
        "echo",
        "printf",
        "true",
        "false",
        "test",
        "[",
        "[[",
        "export",
        "set",
        "unset",
        "shift",
        ":",
        "read",
        "exit",
        "return",
        "local",
        "declare",
        "typeset",
        "readonly",
        "wait",
        "umask",
        "ulimit",
        "dirs",
        "pushd",
        "popd",
        "shopt",
    ]
)
# Switches and their defaults. The last two only matter when the policy has rules that
# refuse: they allow what the policy cannot check, and are off unless turned on.
SWITCH_DEFAULTS = {
    "exec": True,
    "job_start": True,
    "pty": True,
    "pty_raw_input": True,
    "interactive_shells": False,
    "pty_shell_input": False,
}
SWITCHES = tuple(SWITCH_DEFAULTS)

# Environment variables whose value makes a program load or run code: a function
# definition, a startup file, a library, interpreter options.
_CODE_ENV = frozenset(
    [
        "BASH_ENV",
        "ENV",
        "PROMPT_COMMAND",
        "SHELLOPTS",
        "BASHOPTS",
        "ZDOTDIR",
        "GCONV_PATH",
        "PYTHONSTARTUP",
        "PYTHONINSPECT",
        "PERL5OPT",
        "PERL5DB",
        "NODE_OPTIONS",
        "RUBYOPT",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_EXEC_PATH",
        "GIT_TEMPLATE_DIR",
    ]
)
_CODE_ENV_PREFIXES = ("BASH_FUNC_", "LD_", "DYLD_", "GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_")
# Variables whose value is a command line that programs run (git, less, sudo, man...):
# the value is checked like a command.
_COMMAND_ENV = frozenset(
    [
        "PAGER",
        "GIT_PAGER",
        "MANPAGER",
        "SYSTEMD_PAGER",
        "EDITOR",
        "VISUAL",
        "GIT_EDITOR",
        "GIT_SEQUENCE_EDITOR",
        "SVN_EDITOR",
        "FCEDIT",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_ASKPASS",
        "SSH_ASKPASS",
        "SUDO_ASKPASS",
        "GIT_EXTERNAL_DIFF",
        "GIT_PROXY_COMMAND",
        "LESSOPEN",
        "LESSCLOSE",
        "BROWSER",
    ]
)
# Prompt strings are expanded (``$(...)`` included) each time they are shown.
_PROMPT_ENV = frozenset(["PS0", "PS1", "PS2", "PS3", "PS4"])

# Long options written as the short option they mean, per program, for ``args`` rules
# (GNU programs also accept any unambiguous prefix: ``rm --rec``).
_LONG_OPTIONS: dict[str, dict[str, str]] = {
    "rm": {
        "recursive": "-r",
        "force": "-f",
        "dir": "-d",
        "interactive": "-i",
        "verbose": "-v",
        "one-file-system": "",
        "no-preserve-root": "",
        "preserve-root": "",
        "help": "",
        "version": "",
    },
    "cp": {"recursive": "-r", "force": "-f", "remove-destination": "", "archive": "-a"},
    "mv": {"force": "-f", "interactive": "-i", "no-clobber": "-n"},
    "chmod": {"recursive": "-R", "changes": "-c", "silent": "-f", "quiet": "-f"},
    "chown": {"recursive": "-R", "changes": "-c", "silent": "-f", "quiet": "-f"},
    "chgrp": {"recursive": "-R", "changes": "-c", "silent": "-f", "quiet": "-f"},
    "ln": {"force": "-f", "symbolic": "-s"},
    "shred": {"remove": "-u", "force": "-f", "zero": "-z", "iterations": "-n"},
    "git": {"force": "-f", "force-with-lease": "--force-with-lease", "hard": "--hard"},
}

# Builtins and programs that run their arguments as shell code.
_SCRIPT_RUNNERS = frozenset(["eval", "watch"])
_WATCH_VALUE_OPTIONS = frozenset(["-n", "--interval", "-q", "--equexit", "-s", "--shotsdir"])
# Terminal multiplexers run shells that read commands typed into them (and detached
# sessions run command strings the policy cannot follow).
_MULTIPLEXERS = frozenset(["tmux", "screen", "byobu", "zellij", "dtach", "abduco"])
# Builtins that assign to a variable named by an argument.
_ASSIGNING_BUILTINS = frozenset(
    ["read", "mapfile", "readarray", "printf", "getopts", "declare", "typeset", "local"]
)


class PolicyError(ValueError):
    """The policy file is invalid."""


@dataclass(frozen=True)
class Rule:
    message: str
    command: str | None = None  # a program name, matched in command position
    regex: re.Pattern[str] | None = None  # matched against the whole command text
    args: re.Pattern[str] | None = None  # with command: the arguments must match this

    def describe(self) -> str:
        if self.command:
            return f"command {self.command}" + (
                f" with args /{self.args.pattern}/" if self.args else ""
            )
        return f"regex /{self.regex.pattern if self.regex else ''}/"


@dataclass(frozen=True)
class Decision:
    blocked: bool = False
    message: str | None = None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Use:
    """A program the command runs, with its arguments as bash passes them."""

    program: str
    args: tuple[str, ...]
    # False when some argument is only known when the command runs ("$@", $(...), a
    # glob, what xargs reads, what an alias is later called with).
    args_known: bool = True
    unknown: str = ""  # the first argument that is not known


@dataclass(frozen=True)
class Policy:
    deny: tuple[Rule, ...] = ()
    warn: tuple[Rule, ...] = ()
    allow: frozenset[str] | None = None  # allow mode: only these programs
    switches: dict[str, bool] = field(default_factory=dict)
    source: str | None = None

    @property
    def active(self) -> bool:
        return bool(
            self.deny
            or self.warn
            or self.allow is not None
            or any(not self.enabled(name) for name, default in SWITCH_DEFAULTS.items() if default)
        )

    @property
    def restricts(self) -> bool:
        """True when some command can be refused (deny rules or allow mode): then what
        the policy cannot read is refused too."""
        return bool(self.deny) or self.allow is not None

    def enabled(self, switch: str) -> bool:
        return self.switches.get(switch, SWITCH_DEFAULTS.get(switch, True))

    def summary(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "mode": "allow" if self.allow is not None else "deny",
            "allow": sorted(self.allow) if self.allow is not None else None,
            "deny": [r.describe() for r in self.deny],
            "warn": [r.describe() for r in self.warn],
            "switches": {name: self.enabled(name) for name in SWITCHES},
        }

    # -- checking ---------------------------------------------------------------------------

    def check(
        self,
        command: str,
        analysis: Analysis | None = None,
        *,
        stdin: str | None = None,
        terminal: bool = False,
    ) -> Decision:
        """Decide on ``command``. Its standard input is ``stdin`` (the text a call
        gives; "" for none; None for a stream written later, as a job's), or the
        terminal of a PTY session (``terminal``): a shell reading it runs that input."""
        if not self.active:
            return Decision()
        inherited: tuple[str, str | None]
        if terminal:
            inherited = ("terminal", None)
        elif stdin is None:
            inherited = ("open", None)
        else:
            inherited = ("text", stdin) if stdin else ("empty", None)
        found = _Collector()
        found.analysis(analysis or analyze(command), inherited, 0)
        found.texts.insert(0, command)
        for rule in self.deny:
            hit = _hits(rule, found)
            if hit is not None:
                return Decision(True, f"blocked by policy ({rule.describe()}): {hit}{rule.message}")
        if self.restricts and found.uncertain:
            return Decision(
                True,
                "blocked by policy: what this command runs cannot be known before it runs "
                f"({found.uncertain[0]}); write the program, its arguments and its script "
                "literally",
            )
        if self.restricts and found.shells and not self.enabled("interactive_shells"):
            return Decision(
                True,
                f"blocked by policy: this command starts {found.shells[0]}, whose commands "
                "the policy cannot check; run each command with terminal_exec or "
                "terminal_pty_run instead (the policy's switch interactive_shells = true "
                "allows it)",
            )
        if self.allow is not None:
            for use in found.uses:
                if use.program not in self.allow and use.program not in HARMLESS_BUILTINS:
                    listed = ", ".join(sorted(self.allow)) or "nothing"
                    return Decision(
                        True,
                        f"blocked by policy: {use.program} is not in the allow list ({listed})",
                    )
        warnings = tuple(rule.message for rule in self.warn if _hits(rule, found) is not None)
        return Decision(False, None, warnings)

    def check_env(self, env: dict[str, object] | None) -> Decision:
        """The ``env`` argument of a call: names that carry code are refused whenever
        the policy has rules that refuse, and command-line values are checked as
        commands."""
        if not env or not self.restricts:
            return Decision()
        for name, value in env.items():
            if not isinstance(value, str):
                continue
            problem = env_problem(name, value)
            if problem == "command":
                decision = self.check(value, stdin="")
                if decision.blocked:
                    return Decision(
                        True,
                        f"blocked by policy: environment variable {name} is a command line "
                        f"that programs run, and {decision.message}",
                    )
            elif problem:
                return Decision(
                    True,
                    f"blocked by policy: environment variable {name} {problem}; the policy "
                    "refuses it because it would run code the policy cannot check",
                )
        return Decision()

    def check_typed(self, text: str) -> Decision:
        """Typed input at a shell prompt: each complete line is a command."""
        for line in re.split(r"[\r\n]", text):
            if line.strip():
                decision = self.check(line, terminal=True)
                if decision.blocked:
                    return decision
        return Decision()

    def typed_at_shell(self) -> Decision:
        """Raw input that reaches a shell at its prompt: refused whenever the policy has
        rules that refuse, because a line can be assembled over several calls and edited
        with keys (``{Backspace}``, ``{Ctrl-U}``) before it is run."""
        if not self.restricts or self.enabled("pty_shell_input"):
            return Decision()
        return Decision(
            True,
            "blocked by policy: raw input here reaches a shell at its prompt, where typed "
            "lines cannot be checked; send commands with terminal_pty_run(command=...) "
            "instead (the policy's switch pty_shell_input = true allows typing)",
        )

    # -- loading ----------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str) -> Policy:
        try:
            data = tomllib.loads(Path(path).read_text())
        except OSError as exc:
            raise PolicyError(f"cannot read policy file {path}: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise PolicyError(f"policy file {path} is not valid TOML: {exc}") from None
        return cls.from_dict(data, source=path)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str | None = None) -> Policy:
        unknown = set(data) - {"mode", "allow", "deny", "warn", "switches"}
        if unknown:
            raise PolicyError(f"unknown policy keys: {', '.join(sorted(unknown))}")
        mode = data.get("mode", "allow" if "allow" in data else "deny")
        if mode not in ("deny", "allow"):
            raise PolicyError("mode must be 'deny' or 'allow'")
        allow = None
        if mode == "allow":
            names = data.get("allow", [])
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise PolicyError("allow must be a list of program names")
            allow = frozenset(_program_name(n) for n in names)
        switches = data.get("switches", {})
        if (
            not isinstance(switches, dict)
            or set(switches) - set(SWITCHES)
            or not all(isinstance(v, bool) for v in switches.values())
        ):
            raise PolicyError(f"switches must map {', '.join(SWITCHES)} to true/false")
        return cls(
            deny=tuple(_rule(r, "deny") for r in _rules(data.get("deny", []), "deny")),
            warn=tuple(_rule(r, "warn") for r in _rules(data.get("warn", []), "warn")),
            allow=allow,
            switches=dict(switches),
            source=source,
        )


def env_problem(name: str, value: str | None) -> str | None:
    """Why setting ``name`` (to ``value``; None: not literal) can run code: a reason,
    "command" when the value is a command line to check, or None."""
    if name.startswith(_CODE_ENV_PREFIXES) or "%%" in name or name.endswith("()"):
        return "defines shell functions or makes programs load code"
    if name in _CODE_ENV:
        return "makes shells or programs load or run code"
    if name in _COMMAND_ENV:
        return "command" if value is not None else "is a command line that is not literal"
    if name in _PROMPT_ENV and (value is None or any(c in value for c in "$`")):
        return "is a prompt string that runs commands when it is shown"
    return None


def _rules(value: Any, kind: str) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise PolicyError(f"{kind} must be a list of tables ([[{kind}]])")
    return value


def _rule(data: dict[str, Any], kind: str) -> Rule:
    unknown = set(data) - {"command", "regex", "args", "message"}
    if unknown:
        raise PolicyError(f"unknown keys in a {kind} rule: {', '.join(sorted(unknown))}")
    if ("command" in data) == ("regex" in data):
        raise PolicyError(f"each {kind} rule needs exactly one of command or regex")
    message = str(data.get("message") or f"{kind} rule")
    try:
        regex = re.compile(data["regex"]) if "regex" in data else None
        args = re.compile(data["args"]) if "args" in data else None
    except re.error as exc:
        raise PolicyError(f"invalid regex in a {kind} rule: {exc}") from None
    command = _program_name(data["command"]) if "command" in data else None
    return Rule(message=message, command=command, regex=regex, args=args)


def _program_name(name: str) -> str:
    return SimpleCommand(words=(name,)).program


def _hits(rule: Rule, found: _Collector) -> str | None:
    """None when ``rule`` does not match; else a prefix for the refusal message."""
    if rule.regex is not None:
        regex = rule.regex
        return "" if any(regex.search(text) for text in found.texts) else None
    for use in found.uses:
        if use.program != rule.command:
            continue
        if rule.args is None:
            return ""
        if not use.args_known:
            return (
                f"the arguments of {use.program} cannot be known before it runs "
                f"({use.unknown}), so the rule is applied; "
            )
        if any(rule.args.search(text) for text in _arg_forms(use)):
            return ""
    return None


def _arg_forms(use: _Use) -> list[str]:
    """The joined arguments as written, and with long options as short ones."""
    written = " ".join(use.args)
    table = _LONG_OPTIONS.get(use.program)
    if not table:
        return [written]
    normalized = []
    for arg in use.args:
        if arg.startswith("--") and len(arg) > 2:
            name = arg[2:].split("=", 1)[0]
            matches = [long for long in table if long.startswith(name)]
            exact = name in table
            if exact or len(matches) == 1:
                short = table[name if exact else matches[0]]
                if short:
                    normalized.append(short)
                continue
        normalized.append(arg)
    return [written, " ".join(normalized)]


class _Collector:
    """Everything a command can run, found by walking its analysis and the scripts
    nested in it."""

    _MAX_DEPTH = 6

    def __init__(self) -> None:
        self.uses: list[_Use] = []
        self.uncertain: list[str] = []
        self.shells: list[str] = []
        self.texts: list[str] = []  # the command text and its normalized forms

    def analysis(self, analysis: Analysis, stdin: tuple[str, str | None], depth: int) -> None:
        if not analysis.parse_ok:
            # What the parser could not read may hide a command, or change what the
            # parts it did read mean.
            self.uncertain.append("bash syntax the analyser cannot parse")
        for assignment in analysis.assignments:
            self.assignment(assignment.name, assignment.value, depth)
        rendered: list[str] = []
        inner_rendered: list[str] = []
        for command in analysis.commands:
            resolved = command.resolved()
            source = command.stdin or stdin
            links = unwrap(resolved)
            if wraps_further(links[-1]):
                self.uncertain.append(f"more than {MAX_WRAPPERS} wrappers around one command")
            separator = " | " if command.stdin == ("pipe", None) else " ; "
            rendered.append(separator + " ".join((resolved.program, *resolved.args)))
            last = links[-1]
            inner_rendered.append(separator + " ".join((last.program, *last.args)))
            open_args = False
            for link in links:
                self.link(link, source, depth, open_args)
                open_args = open_args or link.program in ("xargs", "parallel")
        self.texts.append("".join(rendered)[3:])
        self.texts.append("".join(inner_rendered)[3:])

    def script(self, text: str, stdin: tuple[str, str | None], depth: int) -> None:
        if depth >= self._MAX_DEPTH:
            self.uncertain.append("scripts nested too deeply")
            return
        self.texts.append(text)
        self.analysis(analyze(text), stdin, depth + 1)

    def assignment(self, name: str, value: str | None, depth: int) -> None:
        problem = env_problem(name, value)
        if problem is None:
            return
        if name == "PROMPT_COMMAND" and value is not None:
            self.script(value, ("terminal", None), depth)
        elif problem == "command" and value is not None:
            self.script(value, ("empty", None), depth)
        else:
            self.uncertain.append(f"{name} {problem}")

    def link(
        self, link: SimpleCommand, stdin: tuple[str, str | None], depth: int, open_args: bool
    ) -> None:
        if not link.name_is_literal:
            self.uncertain.append(f"the program name {link.name or '(an expansion)'}")
            return
        program = link.program
        args = link.args
        unknown = next((a for k, a in enumerate(args) if not link.is_plain(k + 1)), None)
        if open_args:
            unknown = unknown or f"the arguments {program} gets from its input"
        self.uses.append(_Use(program, args, unknown is None, unknown or ""))
        if is_shell(program):
            self.shell(link, stdin, depth)
        elif program in _SCRIPT_RUNNERS:
            self.runner(link, stdin, depth)
        elif program == "trap":
            self.trap(link, stdin, depth)
        elif program == "alias":
            self.alias(link, depth)
        elif program in ("source", "."):
            self.source(link, stdin, depth)
        elif program == "hash":
            self.hash(link)
        elif program == "fc" and not any(a.startswith("-") and "l" in a for a in args):
            self.uncertain.append("fc runs commands from the history")
        elif program == "set":
            self.set_options(link)
        elif program in _MULTIPLEXERS:
            self.shells.append(
                f"a terminal multiplexer ({program}) whose shells read typed commands"
            )
        elif program == "exec" and all(a.isdigit() for a in args) and link.stdin is not None:
            self.uncertain.append("exec redirects the input of every later command")
        if program in _ASSIGNING_BUILTINS or program in ("export", "readonly"):
            for arg in args:
                name = arg.split("=", 1)[0].split("[", 1)[0]
                if env_problem(name, None) and "=" not in arg:
                    self.uncertain.append(f"{program} assigns {name}, which carries code")

    def shell(self, link: SimpleCommand, stdin: tuple[str, str | None], depth: int) -> None:
        given = shell_input(link)
        for rcfile in given.rcfiles:
            if rcfile is None or is_descriptor_path(rcfile):
                self.uncertain.append(f"{link.program} reads a startup file that is not a file")
        if given.source == "argument":
            if given.script is None:
                self.uncertain.append(f"{link.program} -c with a script that is not literal")
            else:
                self.script(given.script, stdin, depth)
        elif given.source == "file":
            if given.path is None:
                self.uncertain.append(f"{link.program} reads a script that is not a file")
            elif reads_stdin_path(given.path):
                self.commands_from(stdin, link.program, depth)
            elif is_descriptor_path(given.path):
                self.uncertain.append(f"{link.program} reads a script from {given.path}")
        else:
            self.commands_from(stdin, link.program, depth)

    def commands_from(self, stdin: tuple[str, str | None], program: str, depth: int) -> None:
        """A shell reads its commands from ``stdin``."""
        kind, value = stdin
        if kind in ("text", "heredoc", "herestring"):
            if value is None:
                self.uncertain.append(f"{program} reads commands from input that is not literal")
            else:
                self.script(value, ("script", None), depth)
        elif kind == "pipe":
            self.uncertain.append(f"{program} reads its commands from a pipe")
        elif kind == "fd" or (kind == "file" and (value is None or reads_stdin_path(value))):
            self.uncertain.append(f"{program} reads its commands from a file descriptor")
        elif kind == "open":
            self.shells.append(f"a shell ({program}) reading commands from the job's stdin")
        elif kind == "terminal":
            self.shells.append(f"an interactive shell ({program}) in the terminal")

    def runner(self, link: SimpleCommand, stdin: tuple[str, str | None], depth: int) -> None:
        """``eval ARGS`` and ``watch [options] ARGS``: the arguments joined are a script
        (``watch -x`` runs them as a program instead: the same words, analysed alike)."""
        args = link.args
        start = 0
        if link.program == "watch":
            while start < len(args) and args[start].startswith("-"):
                option = args[start]
                start += 1
                if option == "--":
                    break
                if option in _WATCH_VALUE_OPTIONS:
                    start += 1
        elif args and args[0] == "--":
            start = 1
        indexes = list(range(start, len(args)))
        if not all(link.is_plain(i + 1) for i in indexes):
            self.uncertain.append(f"{link.program} with a script that is not literal")
            return
        text = " ".join(link.args[i] for i in indexes)
        if text:
            self.script(text, stdin, depth)

    def trap(self, link: SimpleCommand, stdin: tuple[str, str | None], depth: int) -> None:
        args = list(link.args)
        if args and args[0] == "--":
            args = args[1:]
        if len(args) < 2 or args[0].startswith("-"):
            return  # trap -l, trap -p, trap SIG (reset)
        offset = len(link.args) - len(args)
        if not link.is_plain(offset + 1):
            self.uncertain.append("trap with an action that is not literal")
            return
        self.script(args[0], stdin, depth)

    def alias(self, link: SimpleCommand, depth: int) -> None:
        for k, arg in enumerate(link.args):
            if "=" not in arg:
                continue
            if not link.is_plain(k + 1):
                self.uncertain.append("alias with a value that is not literal")
                continue
            before = len(self.uses)
            self.script(arg.split("=", 1)[1], ("terminal", None), depth)
            # The alias is later called with arguments that are not known here.
            for index in range(before, len(self.uses)):
                use = self.uses[index]
                self.uses[index] = _Use(
                    use.program, use.args, False, "the arguments the alias is called with"
                )

    def source(self, link: SimpleCommand, stdin: tuple[str, str | None], depth: int) -> None:
        args = [a for a in link.args if a != "--"]
        if not args:
            return
        index = list(link.args).index(args[0])
        if not link.is_plain(index + 1):
            self.uncertain.append(f"{link.program} of a file that is not literal ({args[0]})")
        elif reads_stdin_path(args[0]):
            self.commands_from(stdin, link.program, depth)
        elif is_descriptor_path(args[0]):
            self.uncertain.append(f"{link.program} reads a script from {args[0]}")

    def hash(self, link: SimpleCommand) -> None:
        args = list(link.args)
        if "-p" in args:
            index = args.index("-p")
            if index + 1 < len(args):
                self.uses.append(
                    _Use(
                        _program_name(args[index + 1]),
                        (),
                        False,
                        "the arguments the hashed name is called with",
                    )
                )

    def set_options(self, link: SimpleCommand) -> None:
        args = list(link.args)
        for k, arg in enumerate(args):
            turns_on = arg.startswith("-") and not arg.startswith("--")
            if turns_on and "H" in arg[1:]:
                self.uncertain.append("set -H turns on history expansion")
            value = args[k + 1] if k + 1 < len(args) else ""
            if turns_on and "o" in arg[1:] and value in ("history", "histexpand"):
                self.uncertain.append(f"set -o {value} turns the history on")

"""Command policy: what agents may run, decided on the parsed command.

A policy file (TOML) holds ``deny`` and ``warn`` rules, an optional allow list, and
switches for whole tool categories. Rules match the programs in command position as the
command analysis sees them: through quoting (``r""m``, ``\\rm``), paths (``/usr/bin/rm``),
wrappers (``sudo``, ``env``, ``command``, ``xargs``, ``find -exec``...), nested scripts
(``bash -c``, ``eval``, ``watch``, ``alias``) and substitutions. A command whose program
cannot be known before it runs (``$(echo rm) -rf``) is refused when the policy has any
command rule to enforce, and always in allow mode.

A policy is a guard rail against mistakes, not a sandbox: a program allowed to run can
still do anything its permissions allow (``python -c "import shutil; ..."``).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .analysis import Analysis, SimpleCommand, analyze, unwrap

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
# Programs whose arguments are themselves shell code.
_SCRIPT_RUNNERS = {"eval": 1, "watch": 1}
_SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "ash", "busybox"})
SWITCHES = ("exec", "job_start", "pty", "pty_raw_input")


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
class Policy:
    deny: tuple[Rule, ...] = ()
    warn: tuple[Rule, ...] = ()
    allow: frozenset[str] | None = None  # allow mode: only these programs
    switches: dict[str, bool] = field(default_factory=dict)
    source: str | None = None

    @property
    def active(self) -> bool:
        return bool(
            self.deny or self.warn or self.allow is not None or not all(self.switches.values())
        )

    def enabled(self, switch: str) -> bool:
        return self.switches.get(switch, True)

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

    def check(self, command: str, analysis: Analysis | None = None) -> Decision:
        if not self.active:
            return Decision()
        analysis = analysis or analyze(command)
        programs, uncertain = _programs(analysis)
        for rule in self.deny:
            if _hits(rule, command, programs):
                return Decision(True, f"blocked by policy ({rule.describe()}): {rule.message}")
        needs_certainty = self.allow is not None or any(r.command for r in self.deny)
        if uncertain and needs_certainty:
            return Decision(
                True,
                "blocked by policy: the program this command runs cannot "
                f"be known before it runs ({uncertain[0]}); write the "
                "program name literally",
            )
        if self.allow is not None:
            for program, _args in programs:
                if program not in self.allow and program not in HARMLESS_BUILTINS:
                    listed = ", ".join(sorted(self.allow)) or "nothing"
                    return Decision(
                        True, f"blocked by policy: {program} is not in the allow list ({listed})"
                    )
        warnings = tuple(rule.message for rule in self.warn if _hits(rule, command, programs))
        return Decision(False, None, warnings)

    def check_typed(self, text: str) -> Decision:
        """Typed input at a shell prompt: each complete line is a command."""
        for line in re.split(r"[\r\n]", text):
            if line.strip():
                decision = self.check(line)
                if decision.blocked:
                    return decision
        return Decision()

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


def _hits(rule: Rule, text: str, programs: list[tuple[str, str]]) -> bool:
    if rule.regex is not None:
        return rule.regex.search(text) is not None
    return any(
        program == rule.command and (rule.args is None or rule.args.search(args))
        for program, args in programs
    )


def _programs(analysis: Analysis, depth: int = 0) -> tuple[list[tuple[str, str]], list[str]]:
    """Every (program, arguments) the command can run, and what could not be resolved."""
    found: list[tuple[str, str]] = []
    uncertain: list[str] = []
    if not analysis.parse_ok and depth == 0 and not analysis.commands:
        uncertain.append("the command could not be parsed")
    for command in analysis.commands:
        for link in unwrap(command):
            if not link.name_is_literal:
                uncertain.append(link.name or "an expansion")
                continue
            found.append((link.program, " ".join(link.args)))
            nested = _nested_scripts(link)
            if nested is None:
                uncertain.append(f"{link.program} with a script that is not literal")
                continue
            if depth < 4:
                for script in nested:
                    inner, unsure = _programs(analyze(script), depth + 1)
                    found += inner
                    uncertain += unsure
    return found, uncertain


def _nested_scripts(command: SimpleCommand) -> list[str] | None:
    """Shell code hidden in arguments; None when it cannot be read before running."""
    program = command.program
    args = list(command.args)
    if program in _SCRIPT_RUNNERS:
        indexes = [i for i, a in enumerate(args) if not a.startswith("-")]
        if not all(command.is_plain(i + 1) for i in indexes):
            return None
        script = " ".join(args[i] for i in indexes)
        return [script] if script else []
    if program in _SHELLS and "-c" in args:
        index = args.index("-c") + 1
        if index >= len(args):
            return []
        return [args[index]] if command.is_plain(index + 1) else None
    if program == "alias":
        return [a.split("=", 1)[1] for a in args if "=" in a]
    return []

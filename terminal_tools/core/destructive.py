"""Warnings for destructive commands.

Rules match parsed commands in command position, including commands run through
wrappers (``sudo``, ``xargs``, ``env``...), ``find -exec`` and ``bash -c``. A command
that merely mentions a dangerous string (``echo "rm -rf /"``) does not match. The
command still runs; the warning is a prompt for the agent to check its intent.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .analysis import Analysis, SimpleCommand, unwrap

_SPECIAL_TARGETS = {
    "/": "/ (the whole filesystem)",
    "/*": "/* (everything under the root)",
    "~": "~ (the home directory)",
    "~/": "~ (the home directory)",
    "~/*": "~/* (everything in the home directory)",
    "$HOME": "$HOME (the home directory)",
    "${HOME}": "$HOME (the home directory)",
    "$HOME/": "$HOME (the home directory)",
    "$HOME/*": "$HOME/* (everything in the home directory)",
    "..": ".. (the parent directory)",
    "../": ".. (the parent directory)",
    "*": "* (everything in the current directory)",
    ".": ". (the current directory)",
    "./": ". (the current directory)",
}

_SQL_CLIENTS = frozenset(
    [
        "psql",
        "mysql",
        "mariadb",
        "sqlite3",
        "sqlite",
        "duckdb",
        "clickhouse-client",
        "clickhouse",
        "sqlcmd",
        "cockroach",
        "snowsql",
        "bq",
    ]
)
_SQL_DANGER = [
    (re.compile(r"\bdrop\s+(table|database|schema|view|index)\b", re.I), "SQL DROP {0}"),
    (re.compile(r"\btruncate\s+(table\s+)?\w", re.I), "SQL TRUNCATE"),
    (
        re.compile(r"\bdelete\s+from\s+[\w.\"`\[\]]+\s*(;|$|\)|'|\")", re.I | re.M),
        "SQL DELETE FROM without WHERE",
    ),
]


def destructive_warning(analysis: Analysis) -> str | None:
    """One message naming every destructive pattern found, or ``None``."""
    found: list[str] = []
    for command in analysis.commands:
        for link in unwrap(command):
            for message in _check(link):
                if message not in found:
                    found.append(message)
    sql_programs = {link.program for command in analysis.commands for link in unwrap(command)}
    if sql_programs & _SQL_CLIENTS:
        for pattern, label in _SQL_DANGER:
            match = pattern.search(analysis.source)
            if match:
                text = label.format((match.group(1) or "").upper()) + " deletes data"
                if text not in found:
                    found.append(text)
    if not found:
        return None
    return "; ".join(found)


def _check(command: SimpleCommand) -> list[str]:
    program = command.program
    if program.startswith("mkfs"):
        return [f"{program} creates a filesystem, erasing the device"]
    rule = _RULES.get(program)
    if rule is None:
        return []
    return rule(command)


def _flags(args: tuple[str, ...]) -> tuple[set[str], set[str], list[str]]:
    """Short flag letters, long flags, and operands (POSIX style, ``--`` ends options)."""
    short: set[str] = set()
    long: set[str] = set()
    operands: list[str] = []
    options_done = False
    for arg in args:
        if options_done or not arg.startswith("-") or arg == "-":
            operands.append(arg)
        elif arg == "--":
            options_done = True
        elif arg.startswith("--"):
            long.add(arg.split("=", 1)[0])
        else:
            short.update(arg[1:])
    return short, long, operands


def _rm(command: SimpleCommand) -> list[str]:
    short, long, operands = _flags(command.args)
    recursive = bool(short & {"r", "R"}) or "--recursive" in long
    force = "f" in short or "--force" in long
    if not (recursive or force):
        return []
    what = (
        "rm -rf force-removes recursively"
        if recursive and force
        else (
            "rm -r removes directories recursively"
            if recursive
            else "rm -f removes files without confirmation"
        )
    )
    special = [_SPECIAL_TARGETS[t] for t in operands if t in _SPECIAL_TARGETS]
    if special:
        what += ", targeting " + " and ".join(special)
    return [what]


def _find(command: SimpleCommand) -> list[str]:
    return ["find -delete removes every file it matches"] if "-delete" in command.args else []


def _git(command: SimpleCommand) -> list[str]:
    sub, rest = _git_subcommand(list(command.args))
    if sub is None:
        return []
    short, long, operands = _flags(tuple(rest))
    found: list[str] = []
    check = _GIT_CHECKS.get(sub)
    message = check(short, long, operands, rest) if check else None
    if message:
        found.append(message)
    if sub == "commit" and "--amend" in long:
        found.append("git commit --amend rewrites the last commit")
    if "--no-verify" in long or (sub == "commit" and "n" in short):
        found.append("--no-verify skips git hooks")
    return found


def _git_subcommand(args: list[str]) -> tuple[str | None, list[str]]:
    """The subcommand and its arguments, past git's global options."""
    while args and args[0].startswith("-"):
        option = args.pop(0)
        if option in ("-C", "-c", "--git-dir", "--work-tree", "--namespace") and args:
            args.pop(0)
    return (args[0], args[1:]) if args else (None, [])


def _touches_everything(operands: list[str]) -> bool:
    return "." in operands or ":/" in operands


_GitCheck = Callable[[set[str], set[str], list[str], list[str]], str | None]

# subcommand -> (short flags, long flags, operands, raw arguments) -> warning or None
_GIT_CHECKS: dict[str, _GitCheck] = {
    "reset": lambda short, long, operands, rest: (
        "git reset --hard discards uncommitted changes" if "--hard" in long else None
    ),
    "clean": lambda short, long, operands, rest: (
        "git clean -f deletes untracked files" if "f" in short or "--force" in long else None
    ),
    "checkout": lambda short, long, operands, rest: (
        "git checkout -- . discards working-tree changes"
        if _touches_everything(operands) and ("--" in rest or "." in operands)
        else None
    ),
    "restore": lambda short, long, operands, rest: (
        "git restore . discards working-tree changes"
        if _touches_everything(operands) and ("--staged" not in long or "--worktree" in long)
        else None
    ),
    "push": lambda short, long, operands, rest: (
        "git push --force rewrites remote history"
        if "f" in short
        or long & {"--force", "--force-with-lease", "--force-if-includes"}
        or any(o.startswith("+") for o in operands)
        else None
    ),
    "branch": lambda short, long, operands, rest: (
        "git branch -D deletes a branch even if it is not merged"
        if "D" in short or ("--delete" in long and "--force" in long)
        else None
    ),
    "stash": lambda short, long, operands, rest: (
        f"git stash {rest[0]} deletes stashed changes"
        if rest[:1] and rest[0] in ("drop", "clear")
        else None
    ),
}


def _dd(command: SimpleCommand) -> list[str]:
    targets = [a[3:] for a in command.args if a.startswith("of=")]
    return [f"dd of={targets[0]} overwrites its target"] if targets else []


def _chmod(command: SimpleCommand) -> list[str]:
    short, long, operands = _flags(command.args)
    recursive = "R" in short or "--recursive" in long
    if recursive and operands and operands[0] in ("777", "a+rwx", "ugo+rwx", "0777"):
        return [f"chmod -R {operands[0]} makes a whole tree world-writable"]
    return []


def _chown(command: SimpleCommand) -> list[str]:
    short, long, _ = _flags(command.args)
    return (
        ["chown -R changes ownership of a whole tree"]
        if ("R" in short or "--recursive" in long)
        else []
    )


def _colon(command: SimpleCommand) -> list[str]:
    # ``: > file`` (or ``true > file``) exists only to empty the file.
    for operator, target in command.redirect_targets:
        if operator in (">", ">|") and not command.args:
            return [f"`{command.name} > {target}` empties {target}"]
    return []


def _kubectl(command: SimpleCommand) -> list[str]:
    return ["kubectl delete removes cluster resources"] if "delete" in command.args else []


def _terraform(command: SimpleCommand) -> list[str]:
    if "destroy" in command.args or ("apply" in command.args and "-destroy" in command.args):
        return ["terraform destroy tears down infrastructure"]
    return []


def _docker(command: SimpleCommand) -> list[str]:
    args = command.args
    if (
        "prune" in args
        and args
        and args[0] in ("system", "volume", "image", "container", "network", "builder")
    ):
        return [f"docker {args[0]} prune deletes unused {args[0]} data"]
    return []


def _remove_item(command: SimpleCommand) -> list[str]:
    lowered = [a.lower() for a in command.args]
    if any(a.startswith("-r") and "-recurse".startswith(a) for a in lowered if len(a) > 2):
        return ["Remove-Item -Recurse deletes a whole tree"]
    return []


def _rd(command: SimpleCommand) -> list[str]:
    if any(a.lower() == "/s" for a in command.args):
        return [f"{command.program} /s deletes a directory tree"]
    return []


def _del(command: SimpleCommand) -> list[str]:
    if any(a.lower() == "/s" for a in command.args):
        return ["del /s deletes matching files in every subdirectory"]
    return []


def _simple(message: str) -> Callable[[SimpleCommand], list[str]]:
    return lambda command: [message]


_RULES: dict[str, Callable[[SimpleCommand], list[str]]] = {
    "rm": _rm,
    "find": _find,
    "git": _git,
    "dd": _dd,
    "shred": _simple("shred destroys file contents"),
    "wipefs": _simple("wipefs erases filesystem signatures"),
    "chmod": _chmod,
    "chown": _chown,
    "truncate": _simple("truncate changes file sizes and can discard data"),
    ":": _colon,
    "true": _colon,
    "kubectl": _kubectl,
    "terraform": _terraform,
    "docker": _docker,
    "remove-item": _remove_item,
    "rd": _rd,
    "rmdir": _rd,
    "del": _del,
}

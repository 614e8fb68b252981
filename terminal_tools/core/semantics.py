"""Semantic exit classification: what an exit status means for the command that ran.

Several tools use a non-zero status for an answer rather than a failure (``grep`` exits 1
when nothing matched, ``diff`` when files differ). Agents that read only the number
retry or give up for no reason; ``semantic_status`` says whether something went wrong.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .analysis import Analysis, SimpleCommand, analyze, innermost, unwrap

if TYPE_CHECKING:
    from .processes import ManagedProcess

Status = Literal["ok", "signal", "error"]

# Exit code -> message for codes that are not failures, per program.
_NOT_FAILURES: dict[str, dict[int, str]] = {
    **{
        p: {1: "No matches found"}
        for p in ("grep", "egrep", "fgrep", "zgrep", "rg", "ag", "ack", "git-grep")
    },
    "diff": {1: "Files differ"},
    "cmp": {1: "Files differ"},
    "test": {1: "Condition is false"},
    "[": {1: "Condition is false"},
    "[[": {1: "Condition is false"},
    "find": {1: "Finished, but some paths could not be read (details on stderr)"},
    "pgrep": {1: "No processes matched"},
    "pkill": {1: "No processes matched"},
}

# Failures with a more useful explanation than the bare number.
_FAILURE_MESSAGES: dict[str, dict[int, str]] = {
    "curl": {
        3: "curl: malformed URL",
        6: "curl: could not resolve host",
        7: "curl: failed to connect to host",
        22: "curl: HTTP error status (400 or above) with --fail",
        28: "curl: operation timed out",
        35: "curl: TLS/SSL handshake failed",
        47: "curl: too many redirects",
        52: "curl: server returned nothing",
        56: "curl: failure receiving network data",
        60: "curl: server certificate could not be verified",
    },
    "timeout": {
        124: "timed out (the `timeout` command's limit was reached)",
        125: "the `timeout` command itself failed",
    },
    "which": {1: "not found on PATH"},
    "xargs": {
        123: "a command run by xargs exited with status 1-125",
        124: "a command run by xargs exited with status 255",
        125: "a command run by xargs was killed by a signal",
    },
}

_NOT_FOUND = re.compile(r"(?:^|\n)(?:[^\n:]*: )?(?:line \d+: )?([^\n:]+): (?:command )?not found")


@dataclass(frozen=True)
class Verdict:
    status: Status
    message: str | None


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def classify_exit(
    exit_code: int,
    analysis: Analysis | None = None,
    *,
    shell_kind: str = "direct",
    stderr_tail: str = "",
) -> Verdict:
    """Classify a finished command's exit status."""
    if exit_code < 0:
        return Verdict("signal", f"Killed by {signal_name(-exit_code)} (signal {-exit_code})")
    if exit_code == 0:
        return Verdict("ok", None)
    deciders = _deciders(analysis) if analysis is not None else []
    shell = shell_kind in ("bash", "sh")
    if exit_code == 127 and shell:
        name = _missing_command(stderr_tail) or (deciders[-1].name if deciders else "")
        return Verdict("error", f"command not found: {name}".rstrip(": "))
    if exit_code == 126 and shell:
        name = deciders[-1].name if deciders else ""
        return Verdict(
            "error", f"not executable (permission denied or not a program): {name}".rstrip(": ")
        )
    if shell and 128 < exit_code <= 128 + 64:
        number = exit_code - 128
        return Verdict(
            "signal", f"Killed by {signal_name(number)} (exit {exit_code} = 128+{number})"
        )
    verdict = _catalog(exit_code, deciders, analysis.pipefail if analysis else False)
    return verdict or Verdict("error", f"Exited with status {exit_code}")


def _deciders(analysis: Analysis) -> list[SimpleCommand]:
    """Deciding commands, seeing through wrappers and into ``bash -c`` scripts."""
    result: list[SimpleCommand] = []
    if not analysis.decidable:
        return result
    for command in analysis.deciders:
        inner = innermost(command)
        if inner.program in ("bash", "sh", "dash") and "-c" in inner.args:
            index = inner.args.index("-c")
            if index + 1 < len(inner.args):
                nested = analyze(inner.args[index + 1])
                result.extend(_deciders(nested))
                continue
        result.append(command)
    return result


def _catalog(code: int, deciders: list[SimpleCommand], pipefail: bool) -> Verdict | None:
    verdicts = [_rule(code, command) for command in deciders]
    if not verdicts:
        return None
    if len(verdicts) > 1:
        # Under pipefail any member may have produced the status: only trust a rule every
        # member agrees on.
        first = verdicts[0]
        if first is not None and all(v == first for v in verdicts):
            return first
        return Verdict(
            "error",
            f"Exited with status {code} (pipefail: any command of the pipeline may have failed)",
        )
    return verdicts[0]


def _rule(code: int, command: SimpleCommand) -> Verdict | None:
    chain = unwrap(command)
    for link in chain[:-1]:  # wrappers that answer for themselves first
        message = _FAILURE_MESSAGES.get(link.program, {}).get(code)
        if message and link.program in ("timeout", "xargs"):
            inner_rule = _NOT_FAILURES.get(chain[-1].program, {}).get(1)
            if link.program == "xargs" and code == 123 and inner_rule:
                return Verdict(
                    "ok",
                    f"{inner_rule} (in at least one xargs batch; exit 123 can also hide an error)",
                )
            return Verdict("error", message)
    target = chain[-1]
    program = target.program
    if program == "git":
        return _git_rule(code, target)
    message = _NOT_FAILURES.get(program, {}).get(code)
    if message:
        return Verdict("ok", message)
    failure = _FAILURE_MESSAGES.get(program, {}).get(code)
    if failure:
        return Verdict("error", failure)
    return None


def _git_rule(code: int, command: SimpleCommand) -> Verdict | None:
    args = command.args
    if (
        code == 1
        and "diff" in args
        and ("--exit-code" in args or "--quiet" in args or "--no-index" in args)
    ):
        return Verdict("ok", "Differences found")
    if code == 1 and "grep" in args:
        return Verdict("ok", "No matches found")
    return None


def _missing_command(stderr_tail: str) -> str | None:
    found = _NOT_FOUND.findall(stderr_tail)
    return found[-1].strip() if found else None


def verdict_of_process(
    process: ManagedProcess,
    analysis: Analysis | None,
    *,
    shell_kind: str,
    timeout_sec: float | None,
) -> Verdict:
    """The one meaning of a finished command or job (a PTY command, which has no process
    of its own, goes to :func:`classify_exit` with the status its shell reported)."""
    if process.timed_out:
        return Verdict(
            "error", f"Timed out after {timeout_sec or 0:g} s; the process tree was killed"
        )
    code = process.returncode if process.returncode is not None else -1
    # 126/127 name the missing or unrunnable program in the error output.
    tail = process.error_tail() if code in (126, 127) else ""
    return classify_exit(code, analysis, shell_kind=shell_kind, stderr_tail=tail)

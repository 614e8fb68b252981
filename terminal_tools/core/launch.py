"""The launch gate: every command the server starts passes here, and only here.

``terminal_exec`` and ``terminal_job_start`` commands, the shell of a PTY session, and
each command or line typed into that shell ask the gate first. In order, it

1. applies the category switch of the policy (a switched-off tool starts nothing, and
   its input is not even parsed),
2. resolves the working directory,
3. refuses a command longer than the OS can start, then parses the command and asks
   the policy (``Policy.check`` / ``Policy.check_typed``; only their public results are
   used here, so the policy's internals can change), in a worker thread when the
   command is large so that no other call waits for it,
4. builds the child's environment: hygiene, the owner mark the process registry and the
   watchdog find the tree by, and the secrets the output redactor masks,
5. routes the command (direct or through a shell) and attaches the resource limits.

It returns a ready plan or raises one typed error. A refusal by the policy is always a
:class:`~terminal_tools.errors.Blocked`, recorded in the audit log here (so no caller
has to remember to), and every tool reports it the same way (``blocked: true`` with the
reason in ``error``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, NoReturn

from ..errors import Blocked, InvalidInput
from .analysis import Analysis, analyze
from .audit import AuditLog
from .commands import (
    CommandPlan,
    analyze_command,
    check_command_size,
    off_loop_if_large,
    plan_command,
    resolve_cwd,
)
from .policy import Decision, Policy
from .processes import Limits
from .redact import Redactor
from .shell import EnvError, ShellError, child_environment, resolve_shell, shell_name

TOOL_NAMES = {"exec": "terminal_exec", "job_start": "terminal_job_start"}
# Keys that interrupt or redraw but never add to the line a shell is reading
# (Ctrl-C, Ctrl-Z, Ctrl-\\, Ctrl-L).
_LINE_NEUTRAL_KEYS = "\x03\x1a\x1c\x0c"
_SWITCHED_OFF = {
    "exec": "terminal_exec is switched off",
    "job_start": "terminal_job_start is switched off",
    "pty": "PTY sessions are switched off",
    "pty_raw_input": "raw input to PTY sessions is switched off",
}


@dataclass(frozen=True)
class ShellPlan:
    """What a PTY session's shell starts with."""

    argv: list[str]
    shell: str  # the bash that runs
    cwd: str
    env: dict[str, str]
    redactor: Redactor | None


class LaunchGate:
    def __init__(
        self,
        *,
        policy: Policy,
        audit: AuditLog,
        base_env: Mapping[str, str],
        next_owner: Callable[[], str],
        redactor_for: Callable[[Mapping[str, object] | None], Redactor],
    ) -> None:
        self.policy = policy
        self.audit = audit
        self.base_env = base_env
        self._next_owner = next_owner
        self._redactor_for = redactor_for

    # -- commands (terminal_exec, terminal_job_start) -----------------------------------

    async def command(
        self,
        launcher: Literal["exec", "job_start"],
        command: str,
        *,
        cwd: str | None,
        default_cwd: str,
        env: Mapping[str, object] | None,
        shell: bool | str,
        limits: Limits | None,
        stdin: str | None = None,
    ) -> CommandPlan:
        """The plan for one command, or the typed reason it may not start. ``stdin`` is
        the text the command reads ("" for none; None while it can still be written, as
        a job's). A large command is analysed and checked in a worker thread, so it
        stalls no other call."""
        where = _Where(launcher, TOOL_NAMES[launcher], command=command, cwd=cwd)
        self._switch(launcher, where)
        directory = resolve_cwd(cwd, default_cwd)
        check_command_size(command)
        self._decide_env(env, where)

        def vet() -> tuple[Analysis, Decision]:
            analysis = analyze_command(command)
            return analysis, self._decide(command, analysis, where, stdin=stdin)

        analysis, decision = await off_loop_if_large(len(command), vet)
        return plan_command(
            command,
            cwd=directory,
            env=env,
            shell=shell,
            base_env=self.base_env,
            owner=self._next_owner(),
            limits=limits,
            redactor=self._redactor_for(env),
            analysis=analysis,
            policy_warnings=decision.warnings,
        )

    # -- PTY sessions -------------------------------------------------------------------

    def shell_session(
        self,
        *,
        cwd: str | None,
        default_cwd: str,
        env: Mapping[str, object] | None,
        shell: str | None,
        cols: int,
        rows: int,
    ) -> ShellPlan:
        """The plan for a PTY session's interactive bash."""
        where = _Where("pty_open", "terminal_pty_open", cwd=cwd)
        self._switch("pty", where)
        directory = resolve_cwd(cwd, default_cwd)
        self._decide_env(env, where)
        try:
            chosen = resolve_shell(shell or None)
        except ShellError as exc:
            raise InvalidInput(str(exc)) from None
        if chosen.kind != "bash":
            raise InvalidInput(f"PTY sessions need bash, not {shell_name(chosen.path)}")
        try:
            child_env = child_environment(
                self.base_env, env, owner=self._next_owner(), interactive=True
            )
        except EnvError as exc:
            raise InvalidInput(str(exc)) from None
        child_env["COLUMNS"], child_env["LINES"] = str(cols), str(rows)
        return ShellPlan(
            argv=[chosen.path, "--norc", "--noprofile", "--noediting", "-i"],
            shell=chosen.path,
            cwd=directory,
            env=child_env,
            redactor=self._redactor_for(env),
        )

    async def session_command(
        self, command: str, *, session_id: str, cwd: str
    ) -> tuple[Analysis, str | None]:
        """A command line sent to a PTY shell: its analysis and the policy's warnings, if
        any (worked out in a worker thread when the command is large)."""
        where = _Where(
            "pty_run", "terminal_pty_run", command=command, cwd=cwd, session_id=session_id
        )
        self._switch("pty", where)
        check_command_size(command)

        def vet() -> tuple[Analysis, str | None]:
            analysis = analyze(command)
            decision = self._decide(command, analysis, where, terminal=True)
            return analysis, "; ".join(decision.warnings) or None

        return await off_loop_if_large(len(command), vet)

    async def typed_input(
        self, text: str, *, at_shell: Callable[[], bool], session_id: str, cwd: str
    ) -> None:
        """Input typed into a PTY session. When it reaches a shell at its prompt
        (``at_shell``, asked only when a policy is in force) it is refused if the policy
        has rules that refuse, unless its pty_shell_input switch is on; then each line is
        checked as a command. Keys that cannot add to a line (``{Ctrl-C}``) always
        pass. Typed text is never written to the audit log, only its size."""
        where = _Where(
            "pty_send",
            "terminal_pty_run",
            cwd=cwd,
            session_id=session_id,
            bytes_in=len(text.encode()),
        )
        self._switch("pty_raw_input", where)
        if not self.policy.active or not text.strip(_LINE_NEUTRAL_KEYS) or not at_shell():
            return

        def vet() -> Decision:
            decision = self.policy.typed_at_shell()
            return decision if decision.blocked else self.policy.check_typed(text)

        decision = await off_loop_if_large(len(text), vet)
        if decision.blocked:
            self._refuse(decision.message or "blocked by policy", where)

    # -- decisions ----------------------------------------------------------------------

    def _switch(self, switch: str, where: _Where) -> None:
        if not self.policy.enabled(switch):
            self._refuse(f"blocked by policy: {_SWITCHED_OFF[switch]}", where)

    def _decide(
        self,
        command: str,
        analysis: Analysis | None,
        where: _Where,
        *,
        stdin: str | None = None,
        terminal: bool = False,
    ) -> Decision:
        decision = self.policy.check(command, analysis, stdin=stdin, terminal=terminal)
        if decision.blocked:
            self._refuse(decision.message or "blocked by policy", where)
        return decision

    def _decide_env(self, env: Mapping[str, object] | None, where: _Where) -> None:
        decision = self.policy.check_env(dict(env) if env else None)
        if decision.blocked:
            self._refuse(decision.message or "blocked by policy", where)

    def _refuse(self, reason: str, where: _Where) -> NoReturn:
        fields = {k: v for k, v in where.fields.items() if v is not None}
        self.audit.record(where.event, tool=where.tool, blocked=True, error=reason, **fields)
        raise Blocked(reason)


class _Where:
    """What the audit record of a refusal says about the call."""

    def __init__(self, event: str, tool: str, **fields: object) -> None:
        self.event = event
        self.tool = tool
        self.fields = fields

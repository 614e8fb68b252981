"""Notices of ended jobs: each job's end reaches the client that started it, once.

Agents forget to poll. When a background job ends and nobody has looked at it, the
next tool result the same client receives carries a notice of that end; the result
after it does not. A job whose end the client already saw (a read that returned its
exit, a signal that ended it, a listing that showed it ended) is never announced.

A *scope* names the client a job belongs to, as ``owners.py`` decides it: one HTTP
session (or principal), or ``None`` for the one client of a stdio server. Nothing
here knows about MCP.

Memory stays bounded without a cap: every tool call takes its scope's notices, and a
client can only start jobs by calling tools, so a scope never holds more notices than
it had jobs running at its last call; a closed session's scope is dropped.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from ..models import EndedJob

COMMAND_CHARS = 120  # a notice quotes at most this much of the command line
MAX_CLOSED = 4096  # closed scopes remembered (a job of one may still end)


def clip_command(command: str) -> str:
    if len(command) <= COMMAND_CHARS:
        return command
    return command[: COMMAND_CHARS - 3] + "..."


class EndNotices:
    """Which ended jobs each scope has not heard about yet.

    The job manager calls :meth:`add` when a job ends unseen and :meth:`discard`
    when its end is shown; adapters call :meth:`take` at the end of every tool call.
    A notice is built when it is taken, so it reports the job as it is then.
    """

    def __init__(self) -> None:
        self._pending: dict[str | None, OrderedDict[str, Callable[[], EndedJob]]] = {}
        # Scopes whose client is gone (a closed HTTP session), most recent last.
        self._closed: OrderedDict[str, None] = OrderedDict()

    def add(self, scope: str | None, job_id: str, notice: Callable[[], EndedJob]) -> None:
        if scope is not None and scope in self._closed:
            return
        self._pending.setdefault(scope, OrderedDict())[job_id] = notice

    def discard(self, scope: str | None, job_id: str) -> None:
        pending = self._pending.get(scope)
        if pending is not None:
            pending.pop(job_id, None)
            if not pending:
                del self._pending[scope]

    def take(self, scope: str | None) -> list[EndedJob]:
        """The notices due to ``scope``, oldest end first; they are cleared."""
        pending = self._pending.pop(scope, None)
        return [build() for build in pending.values()] if pending else []

    def pending(self, scope: str | None) -> list[str]:
        return list(self._pending.get(scope, ()))

    def open_scope(self, scope: str) -> None:
        """A client is (again) in ``scope``: sessions that share a principal's scope
        come and go."""
        self._closed.pop(scope, None)

    def close_scope(self, scope: str) -> None:
        """The client is gone (its session closed): nobody is left to tell, now or
        later (a closed session never comes back)."""
        self._pending.pop(scope, None)
        self._closed[scope] = None
        while len(self._closed) > MAX_CLOSED:
            self._closed.popitem(last=False)

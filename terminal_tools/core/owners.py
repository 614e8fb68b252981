"""Who may see a job, a PTY session or an output handle: the one place that decides.

Every such object records the *scope* of the call that created it, and a lookup from a
call in another scope finds nothing (as if the id were unknown). The scope of the call
being served lives in a context variable that the MCP layer sets for each request:

* ``None``: no scoping. One client per process (stdio, in-memory), which sees everything.
* ``"<principal>"``: an HTTP client without a stable session (stateless protocol), or
  any session of that principal when sessions share (``share_across_sessions``).
* ``"<principal>/<session>"``: one handshake-era HTTP session (the default).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

_current: ContextVar[str | None] = ContextVar("terminal_tools_scope", default=None)


def current() -> str | None:
    """The scope of the call being served."""
    return _current.get()


def visible(owner: str | None) -> bool:
    """Whether an object created in scope ``owner`` belongs to the current call's scope."""
    scope = _current.get()
    return scope is None or owner == scope


@contextlib.contextmanager
def serving(scope: str | None) -> Iterator[None]:
    """Run a call in ``scope``."""
    token = _current.set(scope)
    try:
        yield
    finally:
        _current.reset(token)

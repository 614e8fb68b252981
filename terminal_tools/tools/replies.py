"""The one place where a typed error from the core becomes what the agent sees.

A policy refusal (:class:`Blocked`) is an answer, not a mistake: it becomes the tool's
own result with ``blocked: true`` and the reason in ``error`` (``refused`` builds it),
so it reads the same in every tool that starts something. Every other kind
(:class:`InvalidInput`, :class:`NotFound`, :class:`CapReached`) becomes a tool error
whose text says what to change. ``terminal_exec`` answers every pre-start problem with
its envelope instead (the core builds it), and never reaches this function with one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn, TypeVar, overload

from fastmcp.exceptions import ToolError

from ..errors import Blocked, UserError, printable

R = TypeVar("R")


@overload
def reply_to(exc: UserError) -> NoReturn: ...
@overload
def reply_to(exc: UserError, refused: Callable[[str], R]) -> R: ...
def reply_to(exc: UserError, refused: Callable[[str], R] | None = None) -> R:
    message = printable(str(exc))
    if isinstance(exc, Blocked) and refused is not None:
        return refused(message)
    raise ToolError(message) from None

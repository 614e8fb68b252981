"""Errors the agent caused and can fix, by kind. The core raises them; one function in
``tools/`` (``tools/replies.py``) turns each into what the agent sees.

* :class:`InvalidInput`: a parameter or command the caller must change.
* :class:`NotFound`: an id, handle, path or program that does not exist (any more).
* :class:`CapReached`: a server-wide cap (jobs, PTY sessions) leaves no room now.
* :class:`Blocked`: the operator's policy (a rule or a category switch) refused the
  call. This one is an answer, not a mistake: it reaches the agent as the tool's own
  result with ``blocked: true``, the same way in every tool.
"""


class UserError(ValueError):
    """Base of every error the caller can act on; raise one of the kinds below."""


class InvalidInput(UserError):
    """Bad input, or a state the caller must change first."""


class NotFound(UserError):
    """The thing named does not exist, or no longer does."""


class CapReached(UserError):
    """A server-wide cap is reached; wait for or end something first."""


class Blocked(UserError):
    """Refused by the server's policy (a rule or a switch); nothing was started."""


def printable(text: str) -> str:
    """``text`` safe for JSON: undecodable bytes (surrogate escapes from non-UTF-8 file
    names) become visible ``\\xNN`` escapes instead of breaking serialization."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        try:
            return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a lone surrogate that is no escaped byte: \udXXX text
            return text.encode("utf-8", "backslashreplace").decode("utf-8")

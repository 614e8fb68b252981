"""Errors the agent caused and can fix; tool adapters turn them into clear tool errors."""


class UserError(ValueError):
    """Bad input or a state the caller must change (unknown id, cap reached, ...)."""


def printable(text: str) -> str:
    """``text`` safe for JSON: undecodable bytes (surrogate escapes from non-UTF-8 file
    names) become visible ``\\xNN`` escapes instead of breaking serialization."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")

"""Compiling an agent's regular expression without letting it hold up the server.

The ``regex`` module's time limits bound matching only. Compiling runs in C with the GIL
held, and its cost grows with the product of nested counted repeats:
``(?:(?:a{1000}){1000}){10}`` takes about 10 s to compile, during which no other call
is answered, even from a worker thread. So a pattern is measured before it is compiled
and refused when it would expand too far.
"""

from __future__ import annotations

import re

import regex

from ..errors import InvalidInput

# Each unit of expansion costs about 0.5 µs to compile: 100,000 is about 50 ms.
MAX_REPEAT_EXPANSION = 100_000
MAX_PATTERN_CHARS = 10_000  # compiling a long literal costs about 3.5 µs a character

_COUNTED = re.compile(r"\{(\d*)(?:,(\d*))?\}")


def compile_pattern(pattern: str, flags: int = 0, *, what: str = "pattern") -> regex.Pattern[str]:
    """``pattern`` compiled, or an :class:`InvalidInput` saying why it cannot be."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InvalidInput(
            f"{what} is {len(pattern):,} characters; at most {MAX_PATTERN_CHARS:,} are accepted"
        )
    expansion = repeat_expansion(pattern)
    if expansion > MAX_REPEAT_EXPANSION:
        raise InvalidInput(
            f"{what} nests counted repeats ({{n}}) that expand to {expansion:,} copies; at "
            f"most {MAX_REPEAT_EXPANSION:,} are accepted: use + or * instead of large counts"
        )
    try:
        return regex.compile(pattern, flags)
    except regex.error as exc:
        raise InvalidInput(f"invalid {what}: {exc}") from None


def repeat_expansion(pattern: str) -> int:
    """The largest product of nested counted repeats in ``pattern`` (1 when it has none).
    A scan of the text, not a parse: escapes and character classes are skipped, groups
    nest, and a ``{m,n}`` after an atom or a group multiplies what it follows."""
    stack: list[int] = [1]  # the largest expansion seen inside each open group
    last = 1  # the expansion of the atom or group just before the current position
    i, size = 0, len(pattern)
    while i < size:
        char = pattern[i]
        if char == "\\":
            i, last = i + 2, 1
            continue
        if char == "[":
            i, last = _skip_class(pattern, i), 1
            continue
        if char == "(":
            stack.append(1)
            i, last = i + 1, 1
            continue
        if char == ")" and len(stack) > 1:
            last = stack.pop()
            stack[-1] = max(stack[-1], last)
            i += 1
            continue
        counted = _COUNTED.match(pattern, i) if char == "{" else None
        if counted:
            low, high = counted.group(1), counted.group(2)
            count = int(high) if high else int(low) if low else 1
            last *= max(count, 1)
            stack[-1] = max(stack[-1], last)
            i = counted.end()
            continue
        i, last = i + 1, 1
    return max(stack)


def _skip_class(pattern: str, start: int) -> int:
    """The index just past the character class that opens at ``start``."""
    i = start + 1
    if i < len(pattern) and pattern[i] == "^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1  # a ']' first in the class is a literal
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "]":
            return i + 1
        i += 1
    return i

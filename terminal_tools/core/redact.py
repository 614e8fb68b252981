"""Secret hygiene: values of secret-looking environment variables never leave the server.

The values of variables whose names look like secrets (``*TOKEN*``, ``*SECRET*``,
``*PASSWORD*``, ``*_KEY``, ``AWS_*``... configurable) are replaced by ``[redacted:NAME]``
in everything a command prints, before it is stored: inline text, output handles, job
logs and PTY output all see the masked stream, and its byte offsets are those of the
masked stream. Children still receive the real values.

A value is found even when terminal escape sequences or control characters are printed
between its characters (``printf '%s\\033[0m%s' "${K:0:8}" "${K:8}"``): the cleaning
that removes them before text is returned would otherwise put the value back together.
So the span from the first character to the last, with what lies between, is masked.
A stream holds back a possible start of a value until the bytes that decide it arrive.
Transformations of a value (base64, reversal, one character per line) are out of scope:
nothing short of not giving the value to the command can hide those.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from typing import Any

import regex

_MIN_LENGTH = 6  # shorter values ("1", "true") would mask ordinary text

# What terminal cleaning removes between two visible characters: escape sequences (CSI,
# OSC, charset selection, two-byte escapes) and control characters other than tab,
# newline and carriage return. Bounded, so a match (and what a stream holds) is too.
_GAP = (
    rb"(?:\x1b\[[0-?]{0,32}[ -/]{0,8}[@-~]"
    rb"|\x1b\][^\x07\x1b]{0,256}(?:\x07|\x1b\\)"
    rb"|\x1b[()*+][0-9A-Za-z]"
    rb"|\x1b[@-Z\\-_=>78]"
    rb"|[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f])"
)
_MAX_GAPS = 16  # escape sequences or control characters between two characters
_JUNK = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# The most a stream holds back while a possible value is undecided; past it the held
# bytes are masked as if the value had been printed (failing closed).
_MAX_HOLD = 64 * 1024


class Redactor:
    def __init__(self, secrets: Mapping[str, str]) -> None:
        self.names = sorted(secrets)  # reported (never the values)
        # Longest first, so a secret containing another is masked whole.
        self.secrets = sorted(
            ((value.encode(), f"[redacted:{name}]".encode()) for name, value in secrets.items()),
            key=lambda item: -len(item[0]),
        )
        self.longest = max((len(v) for v, _ in self.secrets), default=0)
        self._labels = {value: label for value, label in self.secrets}
        self._spread: regex.Pattern[bytes] | None = None
        if self.secrets:
            gap = _GAP + b"{0,%d}" % _MAX_GAPS
            alternatives = [
                gap.join(re.escape(value[i : i + 1]) for i in range(len(value)))
                for value, _ in self.secrets
            ]
            self._spread = regex.compile(
                b"|".join(b"(" + a + b")" for a in alternatives), regex.DOTALL
            )

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def mask(self, data: bytes) -> bytes:
        for value, label in self.secrets:
            if value in data:
                data = data.replace(value, label)
        if self._spread is not None and _JUNK.search(data):
            data = self._spread.sub(self._label_of, data)
        return data

    def _label_of(self, match: regex.Match[bytes]) -> bytes:
        index = match.lastindex or 1
        return self.secrets[index - 1][1]

    def mask_text(self, text: str) -> str:
        return (
            self.mask(text.encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")
            if self.secrets
            else text
        )

    def mask_tree(self, value: Any) -> Any:
        """Every string in a JSON-like value masked (search results, file names)."""
        if not self.secrets:
            return value
        if isinstance(value, str):
            return self.mask_text(value)
        if isinstance(value, list):
            return [self.mask_tree(v) for v in value]
        if isinstance(value, dict):
            return {k: self.mask_tree(v) for k, v in value.items()}
        return value

    def held_from(self, data: bytes) -> int:
        """Where the undecided tail of (already masked) ``data`` starts: a possible
        beginning of a value, perhaps with escapes in it; ``len(data)`` if none."""
        if not self.secrets:
            return len(data)
        best = len(data)
        if not _JUNK.search(data, max(0, len(data) - _MAX_HOLD)):
            for value, _ in self.secrets:
                for size in range(min(len(value) - 1, len(data)), 0, -1):
                    if data.endswith(value[:size]):
                        best = min(best, len(data) - size)
                        break
            return best
        assert self._spread is not None
        start = max(0, len(data) - _MAX_HOLD)
        found = self._spread.search(data, start, partial=True)
        while found is not None and not found.partial:
            found = self._spread.search(data, found.start() + 1, partial=True)
        return found.start() if found is not None else best

    def stream(self, boundary: re.Pattern[bytes] | None = None) -> StreamMasker:
        return StreamMasker(self, boundary)


class StreamMasker:
    """Masks a stream that arrives in chunks: a value split across two chunks is held
    back until it can be decided (only ever a possible beginning of a value is held, for
    as long as it takes). ``boundary``: bytes that end whatever came before (a PTY's
    prompt marker), so nothing before them is held."""

    def __init__(self, redactor: Redactor, boundary: re.Pattern[bytes] | None = None) -> None:
        self.redactor = redactor
        self.boundary = boundary
        self.pending = b""

    def feed(self, chunk: bytes) -> bytes:
        data = self.pending + chunk
        decided = b""
        if self.boundary is not None:
            ends = [found.end() for found in self.boundary.finditer(data)]
            if ends:
                decided = self.redactor.mask(data[: ends[-1]])
                data = data[ends[-1] :]
        data = self.redactor.mask(data)
        hold = self.redactor.held_from(data)
        if len(data) - hold > _MAX_HOLD:
            hold = len(data)
        self.pending = data[hold:]
        return decided + data[:hold]

    def flush(self) -> bytes:
        rest, self.pending = self.pending, b""
        return self.redactor.mask(rest)


def secret_values(environ: Mapping[str, str], patterns: Iterable[str]) -> dict[str, str]:
    """Secret-looking variables of ``environ`` (by name) with values worth masking."""
    globs = [p.strip().upper() for p in patterns if p.strip()]
    return {
        name: value
        for name, value in environ.items()
        if len(value) >= _MIN_LENGTH and any(fnmatch.fnmatchcase(name.upper(), g) for g in globs)
    }

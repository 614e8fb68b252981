"""Secret hygiene: values of secret-looking environment variables never leave the server.

The values of variables whose names look like secrets (``*TOKEN*``, ``*SECRET*``,
``*PASSWORD*``, ``*_KEY``, ``AWS_*``... configurable) are replaced by ``[redacted:NAME]``
in everything a command prints, before it is stored: inline text, output handles, job
logs and PTY output all see the masked stream, and its byte offsets are those of the
masked stream. Children still receive the real values.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping

_MIN_LENGTH = 6  # shorter values ("1", "true") would mask ordinary text


class Redactor:
    def __init__(self, secrets: Mapping[str, str]) -> None:
        self.names = sorted(secrets)  # reported (never the values)
        # Longest first, so a secret containing another is masked whole.
        self.secrets = sorted(
            ((value.encode(), f"[redacted:{name}]".encode()) for name, value in secrets.items()),
            key=lambda item: -len(item[0]),
        )
        self.longest = max((len(v) for v, _ in self.secrets), default=0)

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def mask(self, data: bytes) -> bytes:
        for value, label in self.secrets:
            if value in data:
                data = data.replace(value, label)
        return data

    def mask_text(self, text: str) -> str:
        return (
            self.mask(text.encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")
            if self.secrets
            else text
        )

    def stream(self) -> StreamMasker:
        return StreamMasker(self)


class StreamMasker:
    """Masks a stream that arrives in chunks: a secret split across two chunks is held
    back until it can be decided (only ever a possible prefix of a secret is held)."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.pending = b""

    def feed(self, chunk: bytes) -> bytes:
        data = self.redactor.mask(self.pending + chunk)
        hold = self._held_suffix(data)
        self.pending = data[len(data) - hold :] if hold else b""
        return data[: len(data) - hold] if hold else data

    def flush(self) -> bytes:
        rest, self.pending = self.pending, b""
        return self.redactor.mask(rest)

    def _held_suffix(self, data: bytes) -> int:
        best = 0
        for value, _ in self.redactor.secrets:
            for size in range(min(len(value) - 1, len(data)), best, -1):
                if data.endswith(value[:size]):
                    best = size
                    break
        return best


def secret_values(environ: Mapping[str, str], patterns: Iterable[str]) -> dict[str, str]:
    """Secret-looking variables of ``environ`` (by name) with values worth masking."""
    globs = [p.strip().upper() for p in patterns if p.strip()]
    return {
        name: value
        for name, value in environ.items()
        if len(value) >= _MIN_LENGTH and any(fnmatch.fnmatchcase(name.upper(), g) for g in globs)
    }

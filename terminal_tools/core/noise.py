"""Noise control: terminal escape sequences and carriage-return redraws.

Progress bars and coloured output are written for a human watching a terminal. An agent
reading the text wants the final state of each line, without escape codes. The filter
works on a stream (chunks may split an escape sequence or a line anywhere) and keeps its
state bounded, so it can run on gigabytes of output.
"""

from __future__ import annotations

import re

# CSI (colours, cursor movement), OSC (titles, hyperlinks; ended by BEL or ST), charset
# selection, and the remaining two-byte escapes.
_ESCAPE = re.compile(
    rb"\x1b\[[0-?]*[ -/]*[@-~]"
    rb"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
    rb"|\x1b[()*+][0-9A-Za-z]"
    rb"|\x1b[@-Z\\-_=>78]"
)
# Control characters that carry no text (tab, newline and carriage return are handled).
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]")
# The bytes that make a line need cleaning: every control byte but tab and newline
# (carriage return and escape included).
_NOISY = bytes(range(0x00, 0x09)) + bytes(range(0x0B, 0x20)) + b"\x7f"


def _needs_work(data: bytes) -> bool:
    # bytes.translate deleting the noisy bytes is one C loop over the data, about ten
    # times faster than a regex search for a byte class: plain output (nearly all of
    # it) costs a pass at memory speed.
    return len(data.translate(None, _NOISY)) != len(data)


# A line longer than this without a newline is processed anyway (bounded memory).
_MAX_PENDING = 64 * 1024


def clean_line(line: bytes) -> bytes:
    """Strip escapes and keep only what the last carriage return left visible."""
    if not _needs_work(line):
        return line
    line = _ESCAPE.sub(b"", line)
    newline = line.endswith(b"\n")
    body = line[:-1] if newline else line
    body = body.rstrip(b"\r")
    if b"\r" in body:
        # Redraws almost always rewrite the whole line, so the text after the last
        # carriage return is what the user ended up seeing.
        body = body[body.rfind(b"\r") + 1 :]
    body = _CONTROL.sub(b"", body).replace(b"\x1b", b"")
    return body + b"\n" if newline else body


def clean(data: bytes) -> bytes:
    """Clean a complete text (not a stream)."""
    if not _needs_work(data):
        return data
    # Not bytes.splitlines(): it would also split at the carriage returns we collapse.
    lines = data.split(b"\n")
    cleaned = [clean_line(line + b"\n") for line in lines[:-1]]
    if lines[-1]:
        cleaned.append(clean_line(lines[-1]))
    return b"".join(cleaned)


class NoiseFilter:
    """Streaming form of :func:`clean`: feed raw chunks, receive cleaned complete lines."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> bytes:
        if self._pending:
            data = self._pending + data
        cut = data.rfind(b"\n") + 1
        complete, self._pending = data[:cut], data[cut:]
        out = clean(complete) if complete else b""
        if len(self._pending) > _MAX_PENDING:
            out += self._shrink_pending()
        return out

    def pending_text(self) -> bytes:
        """The cleaned partial line, for a snapshot while the stream is still open."""
        return clean_line(self._pending)

    def flush(self) -> bytes:
        rest, self._pending = self._pending, b""
        return clean_line(rest)

    def _shrink_pending(self) -> bytes:
        pending = self._pending
        last_cr = pending.rfind(b"\r")
        if last_cr > 0:
            # Earlier redraws of the current line are invisible: drop them.
            pending = pending[last_cr:]
        if len(pending) <= _MAX_PENDING:
            self._pending = pending
            return b""
        # A huge line with no newline: emit it, keeping a short tail that may hold the
        # start of an escape sequence.
        keep = pending[-64:] if b"\x1b" in pending[-64:] else b""
        body = pending[: len(pending) - len(keep)]
        self._pending = keep
        return clean_line(body)

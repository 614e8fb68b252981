"""The part of a stream that is returned inline: all of it, or its head and its tail.

Output larger than the inline limit keeps about one third from the start and two thirds
from the end: the start says what ran, the end usually carries the error. Only those two
pieces are ever held in memory, however much the command prints.
"""

from __future__ import annotations

from dataclasses import dataclass

from .buffers import utf8_cut
from .noise import NoiseFilter

_BINARY_SNIFF = 8192


@dataclass(frozen=True)
class InlineText:
    text: str
    omitted_bytes: int
    looks_binary: bool
    shown_bytes: int


class InlineCapture:
    def __init__(self, limit_bytes: int, clean: bool) -> None:
        self.limit = limit_bytes
        self.head_limit = limit_bytes // 3
        self.tail_limit = limit_bytes - self.head_limit
        self._filter = NoiseFilter() if clean else None
        self._first = bytearray()  # the first ``limit`` bytes of the (cleaned) text
        self._last = bytearray()  # a rolling tail of the (cleaned) text
        self.total = 0  # bytes of cleaned text seen
        self._sniff = bytearray()

    def feed(self, raw: bytes) -> None:
        if len(self._sniff) < _BINARY_SNIFF:
            self._sniff += raw[: _BINARY_SNIFF - len(self._sniff)]
        text = self._filter.feed(raw) if self._filter else raw
        self._add(text)

    def _add(self, text: bytes) -> None:
        if not text:
            return
        self.total += len(text)
        room = self.limit - len(self._first)
        if room > 0:
            self._first += text[:room]
        self._last += text[-self.tail_limit :]
        if len(self._last) > 2 * self.tail_limit:
            del self._last[: len(self._last) - self.tail_limit]

    def finish(self) -> None:
        if self._filter:
            self._add(self._filter.flush())

    def looks_binary(self) -> bool:
        sample = bytes(self._sniff)
        if b"\x00" in sample:
            return True
        cut = utf8_cut(sample, at_eof=False)
        decoded = sample[:cut].decode("utf-8", errors="replace")
        return decoded.count("\ufffd") > max(8, len(decoded) // 20)

    def render(self, marker: str, *, partial: bool = False) -> InlineText:
        """The inline text. ``marker`` is formatted with ``omitted`` (bytes left out).

        With ``partial`` (a snapshot of a stream still running) the current incomplete
        line is included without consuming it.
        """
        first, last, total = bytes(self._first), bytes(self._last), self.total
        if partial and self._filter:
            extra = self._filter.pending_text()
            if extra:
                total += len(extra)
                if len(first) < self.limit:
                    first += extra[: self.limit - len(first)]
                last = (last + extra)[-self.tail_limit :]
        if self.looks_binary():
            return InlineText("", total, True, 0)
        if total <= self.limit:
            return InlineText(_decode(first), 0, False, len(first))
        head = _line_head(first[: self.head_limit])
        tail = _line_tail(last[-self.tail_limit :])
        omitted = total - len(head) - len(tail)
        text = _decode(head) + marker.format(omitted=omitted) + _decode(tail)
        return InlineText(text, omitted, False, len(head) + len(tail))


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _line_head(data: bytes) -> bytes:
    """Cut the head after its last newline when that loses little; else at a character."""
    newline = data.rfind(b"\n")
    if newline >= len(data) * 3 // 4:
        return data[: newline + 1]
    return data[: utf8_cut(data, at_eof=False)]


def _line_tail(data: bytes) -> bytes:
    """Start the tail after its first newline when that loses little; else at a character."""
    newline = data.find(b"\n")
    if 0 <= newline < len(data) // 4 and newline < len(data) - 1:
        return data[newline + 1 :]
    start = 0
    while start < min(4, len(data)) and 0x80 <= data[start] < 0xC0:
        start += 1
    return data[start:]

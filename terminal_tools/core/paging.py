"""Reading stored output: byte pages that never split a character, and line search.

Search lets an agent find the lines it needs in a 50 MB log without paging through it:
the stream is scanned line by line from ``since_offset``, under one time limit for the
whole call, off the event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Literal

import regex

from ..errors import InvalidInput
from ..models import OutputMatch, OutputPage
from .buffers import StreamBuffer, decode_page
from .patterns import compile_pattern
from .store import OutputStore

_SCAN_BLOCK = 1024 * 1024
_LINE_CLIP = 2000


async def read_output(
    store: OutputStore,
    handle: str,
    *,
    stream: str,
    since_offset: int,
    max_kb: int,
    pattern: str | None = None,
    context: int = 0,
    max_matches: int = 100,
    search_time_limit: float = 10.0,
) -> OutputPage:
    if since_offset < 0:
        raise InvalidInput("since_offset must be >= 0")
    if max_kb < 1:
        raise InvalidInput("max_kb must be at least 1")
    entry = store.get(handle)
    if entry is None:
        return OutputPage(
            output_handle=handle,
            stream=stream,
            data="",
            offset=since_offset,
            next_offset=since_offset,
            eof=True,
            expired=True,
            total_bytes=0,
            message=(
                f"output handle {handle!r} is unknown or expired (handles live "
                f"{store.ttl_sec:g} s after their last use and may be evicted earlier "
                "when the store is full); re-run the command if its side effects allow, "
                "or redirect large output to a file"
            ),
        )
    buffer = entry.streams.get(stream)
    if buffer is None:
        raise InvalidInput(f"stream must be one of {', '.join(entry.streams)}")
    if since_offset > buffer.total:
        raise InvalidInput(
            f"since_offset {since_offset} is past the end of {stream} ({buffer.total} bytes)"
        )
    if pattern is not None:
        return await _search(
            handle,
            stream,
            buffer,
            since_offset,
            pattern,
            context,
            max_kb,
            max_matches,
            search_time_limit,
        )
    chunk = buffer.read(since_offset, max_kb * 1024)
    text, used = decode_page(chunk.data, at_eof=chunk.end >= buffer.total)
    next_offset = chunk.offset + used
    return OutputPage(
        output_handle=handle,
        stream=stream,
        data=text,
        offset=chunk.offset,
        next_offset=next_offset,
        eof=next_offset >= buffer.total,
        expired=False,
        total_bytes=buffer.total,
        truncated_bytes_dropped=chunk.dropped,
    )


async def _search(
    handle: str,
    stream: str,
    buffer: StreamBuffer,
    since: int,
    pattern_text: str,
    context: int,
    max_kb: int,
    max_matches: int,
    time_limit: float,
) -> OutputPage:
    """Scan the stream line by line from ``since``. The bytes are read on the event loop a
    block at a time; the matching runs in a worker thread (the regex module releases the
    GIL while it matches), so a pathological pattern costs this call its time limit and
    never stalls another call."""
    pattern = compile_pattern(pattern_text)
    if context < 0 or context > 50:
        raise InvalidInput("context must be between 0 and 50")
    scanner = _LineScanner(
        pattern,
        context=context,
        max_matches=max_matches,
        budget=max_kb * 1024,  # bytes of matched text returned, so replies stay bounded
        deadline=time.monotonic() + time_limit,
    )
    if since:
        scanner.line_number = await asyncio.to_thread(_count_lines, buffer, since)
    position = since
    carry = b""
    dropped = 0
    while position < buffer.total or carry:
        chunk = buffer.read(position, _SCAN_BLOCK)
        dropped += chunk.dropped
        position = chunk.end
        data = carry + chunk.data
        at_end = position >= buffer.total
        cut = len(data) if at_end else data.rfind(b"\n") + 1
        if cut == 0 and len(data) < 4 * _SCAN_BLOCK:
            carry = data
            continue
        lines, carry = data[:cut], data[cut:]
        await asyncio.to_thread(scanner.scan, lines, position - len(data))
        if scanner.stopped_at is not None or at_end:
            break
    next_offset = scanner.stopped_at if scanner.stopped_at is not None else buffer.total
    message = None
    if scanner.truncated == "timeout":
        message = (
            f"search time limit ({time_limit:g} s) reached at line {scanner.line_number + 1}; "
            "these are the matches before it: continue from next_offset, or simplify the "
            "pattern"
        )
    elif scanner.truncated is not None:
        message = f"stopped after {len(scanner.matches)} matches; continue from next_offset"
    return OutputPage(
        output_handle=handle,
        stream=stream,
        data="",
        offset=since,
        next_offset=next_offset,
        eof=next_offset >= buffer.total,
        expired=False,
        total_bytes=buffer.total,
        truncated_bytes_dropped=dropped,
        matches=scanner.matches,
        truncated=scanner.truncated,
        message=message,
    )


def _count_lines(buffer: StreamBuffer, end: int) -> int:
    count, position = 0, 0
    while position < end:
        chunk = buffer.read(position, min(_SCAN_BLOCK, end - position))
        if not chunk.data:
            break
        count += chunk.data.count(b"\n")
        position = chunk.end
    return count


class _LineScanner:
    """Matches whole lines against a pattern, with context, under one deadline for the
    whole search. ``scan`` runs in a worker thread, one block of lines at a time."""

    def __init__(
        self,
        pattern: regex.Pattern[str],
        *,
        context: int,
        max_matches: int,
        budget: int,
        deadline: float,
    ) -> None:
        self.pattern = pattern
        self.context = context
        self.max_matches = max_matches
        self.budget = budget
        self.deadline = deadline
        self.line_number = 0
        self.matches: list[OutputMatch] = []
        self.before: deque[str] = deque(maxlen=context)
        self.waiting_for_after: list[OutputMatch] = []
        self.stopped_at: int | None = None
        self.truncated: Literal["timeout", "max_matches", "max_bytes"] | None = None

    def scan(self, lines: bytes, offset: int) -> None:
        for raw in lines.splitlines(keepends=True):
            text = raw.decode("utf-8", "replace").rstrip("\r\n")
            remaining = self.deadline - time.monotonic()
            try:
                if remaining <= 0:
                    raise TimeoutError
                hit = self.pattern.search(text, timeout=remaining, concurrent=True)
            except TimeoutError:
                self.stop(offset, "timeout")  # this line is not searched: resume at it
                return
            self.line_number += 1
            self._add_after(text)
            offset += len(raw)
            if hit:
                entry = OutputMatch(
                    line=self.line_number, text=text[:_LINE_CLIP], before=list(self.before)
                )
                self.matches.append(entry)
                self.budget -= len(entry.text)
                if self.context:
                    self.waiting_for_after.append(entry)
                if len(self.matches) >= self.max_matches:
                    self.stop(offset, "max_matches")
                    return
                if self.budget <= 0:
                    self.stop(offset, "max_bytes")
                    return
            self.before.append(text[:_LINE_CLIP])

    def _add_after(self, text: str) -> None:
        if not self.waiting_for_after:
            return
        for entry in self.waiting_for_after:
            entry.after.append(text[:_LINE_CLIP])
        self.waiting_for_after = [m for m in self.waiting_for_after if len(m.after) < self.context]

    def stop(self, offset: int, reason: Literal["timeout", "max_matches", "max_bytes"]) -> None:
        self.stopped_at = offset
        self.truncated = reason

"""Reading stored output: byte pages that never split a character, and line search.

Search lets an agent find the lines it needs in a 50 MB log without paging through it:
the stream is scanned line by line from ``since_offset`` with a time-limited regex.
"""

from __future__ import annotations

import time
from collections import deque

import regex

from ..errors import InvalidInput
from ..models import OutputMatch, OutputPage
from .buffers import StreamBuffer, decode_page
from .store import OutputStore

_SCAN_BLOCK = 1024 * 1024
_LINE_CLIP = 2000


def read_output(
    store: OutputStore,
    handle: str,
    *,
    stream: str,
    since_offset: int,
    max_kb: int,
    pattern: str | None = None,
    context: int = 0,
    max_matches: int = 100,
    regex_timeout: float = 1.0,
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
        return _search(
            handle,
            stream,
            buffer,
            since_offset,
            pattern,
            context,
            max_kb,
            max_matches,
            regex_timeout,
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


def _search(
    handle: str,
    stream: str,
    buffer: StreamBuffer,
    since: int,
    pattern_text: str,
    context: int,
    max_kb: int,
    max_matches: int,
    timeout: float,
) -> OutputPage:
    try:
        pattern = regex.compile(pattern_text)
    except regex.error as exc:
        raise InvalidInput(f"invalid pattern: {exc}") from None
    if context < 0 or context > 50:
        raise InvalidInput("context must be between 0 and 50")
    line_number = buffer.read(0, since).data.count(b"\n") if since else 0
    matches: list[OutputMatch] = []
    before: deque[str] = deque(maxlen=context)
    pending_after: list[tuple[OutputMatch, int]] = []
    budget = max_kb * 1024  # bytes of matched text returned, so replies stay bounded
    position = since
    carry = b""
    deadline = time.monotonic() + max(timeout * 10, 5.0)
    message = None
    dropped = 0
    stopped_at = None
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
        offset_of_line = position - len(data)
        for raw in lines.splitlines(keepends=True):
            line_number += 1
            text = raw.decode("utf-8", "replace").rstrip("\r\n")
            for match_entry, _ in pending_after:
                if len(match_entry.after) < context:
                    match_entry.after.append(text[:_LINE_CLIP])
            pending_after = [(m, n) for m, n in pending_after if len(m.after) < context]
            try:
                hit = pattern.search(text, timeout=timeout)
            except TimeoutError:
                message = f"pattern timed out on line {line_number}; simplify it"
                hit = None
            if hit:
                entry = OutputMatch(line=line_number, text=text[:_LINE_CLIP], before=list(before))
                matches.append(entry)
                budget -= len(entry.text)
                if context:
                    pending_after.append((entry, line_number))
                if len(matches) >= max_matches or budget <= 0:
                    stopped_at = offset_of_line + len(raw)
                    break
            before.append(text[:_LINE_CLIP])
            offset_of_line += len(raw)
        if stopped_at is not None or time.monotonic() > deadline:
            if stopped_at is None:
                stopped_at = offset_of_line
                message = "search time limit reached; continue from next_offset"
            break
        if at_end:
            break
    next_offset = stopped_at if stopped_at is not None else buffer.total
    if stopped_at is not None and message is None:
        message = f"stopped after {len(matches)} matches; continue from next_offset"
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
        matches=matches,
        message=message,
    )

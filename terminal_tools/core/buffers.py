"""Append-only byte streams with absolute offsets, bounded in memory, backed by disk.

A :class:`StreamBuffer` is what every process stream (stdout, stderr, a PTY) writes into.
Readers address bytes by absolute offset from the start of the stream, so a reader that
comes back later continues exactly where it stopped, with no gap and no repeat.

Memory holds only the most recent ``window_bytes``. As soon as a stream outgrows that
window, everything is also written to a spool file that is unlinked on creation (so no
file is left behind even if the server is killed). The spool keeps the first
``spool_limit`` bytes; the memory window keeps the latest bytes; only what falls between
the two is dropped, and a read that crosses that gap reports exactly how many bytes it
skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections import deque
from dataclasses import dataclass


class SpoolBudget:
    """Disk bytes all spool files of the server may use together."""

    def __init__(self, limit: int, directory: str | None = None) -> None:
        self.limit = limit
        self.used = 0
        self._directory = directory

    @property
    def directory(self) -> str:
        if self._directory is None:
            # Private (0700) so other local users cannot read command output.
            self._directory = tempfile.mkdtemp(prefix="terminal-tools-")
        return self._directory

    def reserve(self, wanted: int) -> int:
        granted = max(0, min(wanted, self.limit - self.used))
        self.used += granted
        return granted

    def release(self, amount: int) -> None:
        self.used = max(0, self.used - amount)

    def cleanup(self) -> None:
        if self._directory is not None:
            with contextlib.suppress(OSError):
                os.rmdir(self._directory)


@dataclass(frozen=True)
class Chunk:
    """Bytes read from a stream, where they start, and what was skipped before them."""

    data: bytes
    offset: int
    dropped: int = 0

    @property
    def end(self) -> int:
        return self.offset + len(self.data)


class StreamBuffer:
    def __init__(
        self,
        window_bytes: int,
        spool_limit: int,
        budget: SpoolBudget | None = None,
    ) -> None:
        self.window_bytes = window_bytes
        self.spool_limit = spool_limit
        self._budget = budget
        # memoryviews: the oldest chunk is trimmed in place, without copying it.
        self._chunks: deque[memoryview] = deque()
        self._window_start = 0
        self._window_size = 0
        self.total = 0
        self._spool_fd: int | None = None
        self._spooled = 0
        self._reserved = 0
        self._spool_failed = False
        self.eof = False
        self._waiters: list[asyncio.Future[None]] = []

    # -- writing -----------------------------------------------------------------------

    def append(self, data: bytes) -> None:
        if not data:
            return
        if self._spool_fd is None and self._window_size + len(data) > self.window_bytes:
            self._start_spool()
        if self._spool_fd is not None:
            self._spool_write(data, self.total)
        self._chunks.append(memoryview(data))
        self._window_size += len(data)
        self.total += len(data)
        # Keep exactly the last window_bytes: whole chunks go, then the front of the
        # oldest one is cut (a view: no copy), so no byte is dropped that did not have to be.
        while self._window_size > self.window_bytes:
            excess = self._window_size - self.window_bytes
            oldest = self._chunks[0]
            if len(oldest) <= excess:
                self._chunks.popleft()
                cut = len(oldest)
            else:
                self._chunks[0] = oldest[excess:]
                cut = excess
            self._window_size -= cut
            self._window_start += cut
        self._wake()

    def close(self) -> None:
        """Mark end of stream. Frees the memory window when the spool holds everything."""
        self.eof = True
        if self._spool_fd is not None and self._spooled == self.total:
            self._chunks.clear()
            self._window_start = self.total
            self._window_size = 0
        self._wake()

    def release(self) -> None:
        """Forget all data and give the disk space back."""
        self._chunks.clear()
        self._window_size = 0
        self._window_start = self.total
        if self._spool_fd is not None:
            os.close(self._spool_fd)
            self._spool_fd = None
        if self._budget is not None:
            self._budget.release(self._reserved)
        self._reserved = 0
        self._spooled = 0
        self._wake()

    def raise_spool_limit(self, limit: int) -> None:
        """Allow more disk (used when a running command is promoted to a job)."""
        self.spool_limit = max(self.spool_limit, limit)

    def _start_spool(self) -> None:
        if self._spool_failed or self.spool_limit <= 0 or self._window_start > 0:
            return
        directory = self._budget.directory if self._budget else tempfile.gettempdir()
        try:
            fd, path = tempfile.mkstemp(prefix="spool-", dir=directory)
            os.unlink(path)
        except OSError:
            self._spool_failed = True
            return
        self._spool_fd = fd
        offset = 0
        for chunk in self._chunks:
            self._spool_write(chunk, offset)
            offset += len(chunk)

    def _spool_write(self, data: bytes | memoryview, offset: int) -> None:
        assert self._spool_fd is not None
        room = self.spool_limit - self._spooled
        # The spool must stay a contiguous prefix of the stream: once it has stopped
        # short (cap or budget reached), later bytes never go to disk.
        if room <= 0 or offset != self._spooled:
            return
        piece = data[:room]
        if self._budget is not None:
            extra = self._spooled + len(piece) - self._reserved
            if extra > 0:
                granted = self._budget.reserve(extra)
                self._reserved += granted
                piece = piece[: self._reserved - self._spooled]
        try:
            view = memoryview(piece)
            while view:
                written = os.write(self._spool_fd, view)
                view = view[written:]
        except OSError:
            # Disk full or similar: keep serving from memory; the gap is counted on read.
            self._spool_failed = True
            self.spool_limit = self._spooled
            return
        self._spooled += len(piece)

    # -- reading -----------------------------------------------------------------------

    @property
    def first_available(self) -> int:
        """Smallest offset that can still be read."""
        if self._spooled > 0 or self.total == 0:
            return 0
        return self._window_start

    @property
    def retained_bytes(self) -> int:
        return self._spooled + self._window_size

    @property
    def dropped_bytes(self) -> int:
        """Bytes of the stream that can no longer be read by anyone."""
        if self._spooled >= self._window_start:
            return 0
        return self._window_start - self._spooled

    def read(self, offset: int, max_bytes: int) -> Chunk:
        """Bytes from ``offset`` (clamped to what exists), at most ``max_bytes``."""
        offset = max(0, min(offset, self.total))
        dropped = 0
        if offset >= self._spooled and offset < self._window_start:
            dropped = self._window_start - offset
            offset = self._window_start
        parts: list[bytes] = []
        want = max_bytes
        position = offset
        if position < self._spooled and want > 0 and self._spool_fd is not None:
            count = min(want, self._spooled - position)
            data = os.pread(self._spool_fd, count, position)
            parts.append(data)
            position += len(data)
            want -= len(data)
        if want > 0 and position >= self._window_start:
            parts.append(self._read_window(position, want))
        return Chunk(b"".join(parts), offset, dropped)

    def _read_window(self, offset: int, max_bytes: int) -> bytes:
        out: list[memoryview] = []
        start = self._window_start
        end_wanted = offset + max_bytes
        for chunk in self._chunks:
            chunk_end = start + len(chunk)
            if chunk_end > offset:
                lo = max(0, offset - start)
                hi = min(len(chunk), end_wanted - start)
                out.append(chunk[lo:hi])
                if chunk_end >= end_wanted:
                    break
            start = chunk_end
        return b"".join(out)

    def read_all(self) -> bytes:
        return self.read(0, self.total).data

    # -- waiting -----------------------------------------------------------------------

    async def wait_beyond(self, offset: int) -> None:
        """Return once the stream is longer than ``offset`` or has ended."""
        while self.total <= offset and not self.eof:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


def utf8_cut(data: bytes, at_eof: bool) -> int:
    """Length of the longest prefix of ``data`` that does not end inside a UTF-8 character.

    A page that ends mid-character would show a replacement character and the next page
    would start with garbage; cutting before the partial character avoids both. At the end
    of a finished stream an incomplete character can never complete, so it is kept.
    """
    if at_eof or not data:
        return len(data)
    # Look back at most 3 bytes for the lead byte of the last character.
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if 0x80 <= byte < 0xC0:  # continuation byte: keep looking for the lead byte
            continue
        if byte < 0x80:
            return len(data)
        needed = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
        return len(data) if back >= needed else len(data) - back
    return len(data)


def decode_page(data: bytes, at_eof: bool) -> tuple[str, int]:
    """Decode a page without splitting a character; returns text and bytes consumed.

    If ``data`` is shorter than one character (a tiny ``max_bytes``), the partial
    character is consumed anyway so that paging always makes progress.
    """
    cut = utf8_cut(data, at_eof)
    if cut == 0 and data:
        cut = len(data)
    return data[:cut].decode("utf-8", errors="replace"), cut

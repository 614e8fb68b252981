"""The output store: complete streams of finished commands, behind an ``output_handle``.

Entries are evicted least-recently-used first when the store's byte cap is reached, and
expire a fixed time after their last access. Both operations are O(1) per entry
(an ordered dict keeps recency order, and the oldest entries sit at its front).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from . import owners
from .buffers import StreamBuffer


@dataclass
class StoredOutput:
    handle: str
    streams: dict[str, StreamBuffer]
    size: int
    last_access: float = field(default=0.0)
    scope: str | None = field(default_factory=owners.current)  # who may see it (owners.py)
    # The streams that did not fit inline (or looked binary): what the agent came for.
    cut: tuple[str, ...] = ()

    def default_stream(self) -> str:
        """The stream a read without ``stream`` means: the one that was cut (stdout when
        both were, or when neither was recorded)."""
        for name in ("stdout", "stderr"):
            if name in self.cut and name in self.streams:
                return name
        return "stdout"

    def release(self) -> None:
        for buffer in self.streams.values():
            buffer.release()


class OutputStore:
    def __init__(
        self,
        max_bytes: int,
        ttl_sec: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_bytes = max_bytes
        self.ttl_sec = ttl_sec
        self._clock = clock
        self._entries: OrderedDict[str, StoredOutput] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.evicted = 0

    @property
    def bytes_used(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, streams: dict[str, StreamBuffer], cut: tuple[str, ...] = ()) -> str:
        handle = "out_" + secrets.token_hex(8)
        size = sum(buffer.retained_bytes for buffer in streams.values())
        entry = StoredOutput(handle, streams, size, self._clock(), cut=cut)
        with self._lock:
            self._expire()
            # Make room; an entry larger than the whole cap is still kept (alone), so the
            # newest output is always retrievable at least once.
            while self._entries and self._bytes + size > self.max_bytes:
                self._evict_oldest()
            self._entries[handle] = entry
            self._bytes += size
        return handle

    def get(self, handle: str) -> StoredOutput | None:
        with self._lock:
            self._expire()
            entry = self._entries.get(handle)
            if entry is None or not owners.visible(entry.scope):
                return None
            entry.last_access = self._clock()
            self._entries.move_to_end(handle)
            return entry

    def clear(self) -> None:
        with self._lock:
            while self._entries:
                self._evict_oldest()

    def _expire(self) -> None:
        deadline = self._clock() - self.ttl_sec
        while self._entries:
            oldest = next(iter(self._entries.values()))
            if oldest.last_access > deadline:
                break
            self._evict_oldest()

    def _evict_oldest(self) -> None:
        _, entry = self._entries.popitem(last=False)
        self._bytes -= entry.size
        self.evicted += 1
        entry.release()

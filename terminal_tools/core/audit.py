"""Audit log: one JSON line per spawn-style call and per signal.

Opt-in (``--audit-log PATH``). The file is opened for appending with line buffering, so
each record is written whole as it happens. Records never contain environment values;
command text is masked like output (see :mod:`redact`).
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from typing import Any, TextIO

from .redact import Redactor


class AuditLog:
    def __init__(self, path: str | None, redactor: Redactor | None = None) -> None:
        self.path = path
        self.redactor = redactor
        self._file: TextIO | None = None
        self._lock = threading.Lock()
        if path:
            self._file = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115

    def __bool__(self) -> bool:
        return self._file is not None

    def record(self, event: str, **fields: Any) -> None:
        if self._file is None:
            return
        entry: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "event": event,
        }
        for key, value in fields.items():
            if isinstance(value, str) and self.redactor and key in ("command", "data"):
                value = self.redactor.mask_text(value)
            entry[key] = value
        line = json.dumps(entry, ensure_ascii=False)
        with self._lock:
            self._file.write(line + "\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)

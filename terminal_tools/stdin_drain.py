"""stdio: when stdin closes, finish the requests already read before the server exits.

The MCP SDK ends the session as soon as its stdin reader sees EOF, answering every
request still running with "Connection closed" (``printf '<init>\n<call>\n' | server``
loses the call). A pump thread sits between the real stdin and the SDK: it copies the
bytes through a pipe, and on EOF keeps the pipe open until no request is in flight (at
most ``grace`` seconds), then closes it, and the SDK shuts down as before.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

_SETTLE = 0.1  # a request read just before EOF reaches the server within this


def hold_stdin_until_idle(idle: threading.Event, grace: float) -> None:
    """Put a pipe on fd 0 fed from the real stdin (POSIX; elsewhere nothing changes)."""
    if os.name != "posix":
        return
    try:
        real = os.dup(0)
    except OSError:
        return
    read_end, write_end = os.pipe()
    os.dup2(read_end, 0)
    os.close(read_end)

    def pump() -> None:
        try:
            _copy_until_eof(real, write_end)
            _wait_until_idle(idle, grace)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                os.close(write_end)
            with contextlib.suppress(OSError):
                os.close(real)

    threading.Thread(target=pump, name="stdin-pump", daemon=True).start()


def _copy_until_eof(source: int, target: int) -> None:
    while True:
        try:
            data = os.read(source, 65536)
        except InterruptedError:
            continue
        except OSError:
            return
        if not data:
            return
        view = memoryview(data)
        while view:
            view = view[os.write(target, view) :]


def _wait_until_idle(idle: threading.Event, grace: float) -> None:
    deadline = time.monotonic() + grace
    while True:
        time.sleep(_SETTLE)
        if idle.is_set() or time.monotonic() >= deadline:
            return
        idle.wait(max(0.0, deadline - time.monotonic()))

"""What a stdio MCP server wrote to stderr: the last lines, kept in a ring by a thread that
drains the pipe, cleaned for the error messages that say why a server did not start or died."""

from __future__ import annotations

import re
import threading
from collections import deque
from typing import Any

# What is kept of a stdio server's stderr (a ring: its last lines) for the error that says why
# it did not start or died.
STDERR_LINES = 20
STDERR_BYTES = 4096


def clean_line(raw: bytes) -> str:
    """A line of a server's stderr as text for an error message: no colours, no control
    characters."""
    text = _ANSI.sub("", raw.decode("utf-8", errors="replace")).rstrip()
    return "".join(c if c >= " " or c == "\t" else "?" for c in text)


# A terminal escape (colours, cursor moves): npm and node colour their errors.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


class StderrTail:
    """The last lines a stdio server wrote to stderr: a ring of STDERR_LINES raw lines (each
    cut at STDERR_BYTES), drained in chunks by a thread of its own so a chatty server never
    blocks on a full pipe and a flood costs only the reading. `lines()` is what an error
    message shows of it (cleaned, at most STDERR_BYTES)."""

    def __init__(self) -> None:
        self._lines: deque[bytes] = deque(maxlen=STDERR_LINES)
        self._partial = b""
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def drain(self, pipe: Any) -> None:
        self._thread = threading.Thread(
            target=self._run, args=(pipe,), daemon=True, name="mcp-stderr"
        )
        self._thread.start()

    def _run(self, pipe: Any) -> None:
        try:
            while chunk := pipe.read1(65536):
                *complete, partial = (self._partial + chunk).split(b"\n")
                with self._lock:
                    self._lines.extend(line[:STDERR_BYTES] for line in complete[-STDERR_LINES:])
                    self._partial = partial[-STDERR_BYTES:]
        except (OSError, ValueError):
            pass  # closed under us by the shutdown

    def lines(self, *, wait_s: float = 0.0) -> list[str]:
        """The kept lines, cleaned, the last STDERR_BYTES of them; `wait_s`: how long to wait
        for the server's end of the pipe to close (it exited: everything it wrote is in)."""
        if self._thread is not None and wait_s:
            self._thread.join(wait_s)
        with self._lock:
            raw = [*self._lines, self._partial]
        lines = [text for text in map(clean_line, raw) if text.strip()]
        kept: list[str] = []
        size = 0
        for line in reversed(lines):
            size += len(line) + 1
            if size > STDERR_BYTES:
                break
            kept.append(line)
        return kept[::-1]

"""A progress bar on stderr, standard library only.

On a terminal it redraws one line (``[#####.....] 5/10 resolved 4 errors 0``); elsewhere
(CI logs, pipes) it prints one line per finished task instead, since carriage returns make
a log unreadable.
"""

from __future__ import annotations

import shutil
import sys
import threading
from typing import IO

__all__ = ["Progress"]


class Progress:
    """Counts finished tasks and shows it; thread-safe."""

    def __init__(self, total: int, *, stream: IO[str] | None = None, enabled: bool = True) -> None:
        self.total = total
        self.done = 0
        self.resolved = 0
        self.errors = 0
        self._stream = stream if stream is not None else sys.stderr
        self._enabled = enabled
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._lock = threading.Lock()

    def update(
        self, task_id: str, reward: float | None, reason: str, seconds: float, error: bool
    ) -> None:
        """Record one finished task (``reward`` ``None``: an error, no reward) and redraw."""
        with self._lock:
            self.done += 1
            self.resolved += reward is not None and reward >= 1.0
            self.errors += error or reward is None
            if not self._enabled:
                return
            if self._tty:
                self._draw()
            else:
                shown = "-" if reward is None else f"{reward:g}"
                print(
                    f"[{self.done}/{self.total}] {task_id} reward={shown} "
                    f"({reason[:80]}) {seconds:.1f}s",
                    file=self._stream,
                    flush=True,
                )

    def _draw(self) -> None:
        columns = shutil.get_terminal_size((80, 20)).columns
        tail = f" {self.done}/{self.total} resolved {self.resolved} errors {self.errors}"
        width = max(10, min(40, columns - len(tail) - 3))
        filled = int(width * self.done / self.total) if self.total else width
        bar = "#" * filled + "." * (width - filled)
        self._stream.write(f"\r[{bar}]{tail}")
        self._stream.flush()

    def close(self) -> None:
        """End the bar's line."""
        with self._lock:
            if self._enabled and self._tty:
                self._stream.write("\n")
                self._stream.flush()

"""A dependency-free progress bar for long replays and evaluations (on stderr)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """Counts work done and shows rate and time left.

    On a terminal the bar redraws in place at most ten times a second; elsewhere
    (CI logs, pipes) it prints one line every ``log_every`` seconds, so long
    jobs still show they are alive without flooding the log. ``enabled=False``
    silences it.

    >>> import io
    >>> out = io.StringIO()
    >>> p = Progress(total=10, label="events", stream=out, enabled=True, log_every=0)
    >>> p.advance(10); p.close()
    >>> "10/10 events" in out.getvalue()
    True
    """

    def __init__(
        self,
        total: int | None = None,
        label: str = "events",
        *,
        stream: TextIO | None = None,
        enabled: bool = True,
        log_every: float = 10.0,
    ) -> None:
        self.total = total
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.log_every = log_every
        self.done = 0
        self.start = time.monotonic()
        self._last = 0.0

    def advance(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        interval = 0.1 if self.tty else self.log_every
        if now - self._last >= interval:
            self._last = now
            self._draw(now)

    def _line(self, now: float) -> str:
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        if self.total:
            frac = min(1.0, self.done / self.total)
            bar = "#" * int(frac * 24)
            left = (self.total - self.done) / rate if rate > 0 else 0.0
            return (
                f"[{bar:<24}] {self.done:,}/{self.total:,} {self.label} "
                f"{rate:,.0f}/s ETA {_clock(left)}"
            )
        return f"{self.done:,} {self.label} {rate:,.0f}/s {_clock(elapsed)}"

    def _draw(self, now: float) -> None:
        line = self._line(now)
        if self.tty:
            self.stream.write("\r" + line + "\x1b[K")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if not self.enabled:
            return
        line = self._line(time.monotonic())
        self.stream.write(("\r" + line + "\x1b[K\n") if self.tty else line + "\n")
        self.stream.flush()

"""Progress that follows the evaluation: labels evaluated of those expected.

A replay through Kafka is done long before its evaluation: the events are on the topics
within seconds, the labels are scored for minutes after. :class:`LabelProgress` shows
what is evaluated -- labels scored of those expected, the instances still pending,
the re-predictions made when re-evaluating -- with, on the line before, the events
produced by the replay (if there is one). It ends only when :meth:`close` is called,
once the results are in.

On a terminal both lines are redrawn in place at most ten times a second. Elsewhere
(CI logs, pipes) each line is printed on its own, prefixed ``replay:`` or ``evaluated:``,
every ``log_every`` seconds, when the replay ends and at the end: plain lines, no escape
sequences.

>>> import io
>>> out = io.StringIO()
>>> p = LabelProgress(4, replay_total=9, stream=out, log_every=3600)
>>> p.replayed(9); p.replay_done()
>>> p.update(4, pending=0, repredictions=12); p.close()
>>> [line.split(",")[0] for line in out.getvalue().splitlines()]
['replay: 9/9 events', 'evaluated: 4/4 labels']
>>> "12 re-predictions" in out.getvalue()
True
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from streameval.pipeline.progress import _clock


class LabelProgress:
    """Labels evaluated / expected (pending, re-predictions), after a replay's events.

    ``expected`` is the number of labels the stream holds (``None`` if unknown);
    ``replay_total`` the number of events the replay produces, or ``None`` for no replay
    line. :meth:`replayed` may be called from another thread (the replay's).
    """

    def __init__(
        self,
        expected: int | None,
        *,
        replay_total: int | None = None,
        replay: bool | None = None,
        stream: TextIO | None = None,
        enabled: bool = True,
        log_every: float = 10.0,
    ) -> None:
        self.expected = expected
        self.replay_total = replay_total
        self.has_replay = replay if replay is not None else replay_total is not None
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.log_every = log_every
        self.events = 0
        self.labelled = 0
        self.pending = 0
        self.repredictions = 0
        self.start = time.monotonic()
        self.replay_seconds: float | None = None
        self._shown: tuple[int, int, int] | None = None  # the counts of the last line drawn
        self._lock = threading.Lock()
        self._drawn = False  # on a terminal: the two lines are on screen
        self._last = {"replay": self.start, "evaluated": self.start}

    # -- counting ---------------------------------------------------------------------------

    def replayed(self, n: int = 1) -> None:
        """``n`` more events produced by the replay."""
        with self._lock:
            self.events += n
            self._maybe_draw("replay")

    def replay_done(self) -> None:
        """The replay produced its last event: its line says so, once."""
        with self._lock:
            if self.replay_seconds is not None:
                return
            self.replay_seconds = time.monotonic() - self.start
            self._draw("replay", force=True)

    def update(self, labelled: int, *, pending: int = 0, repredictions: int = 0) -> None:
        """The evaluation's counts now (absolute, not increments)."""
        with self._lock:
            self.labelled, self.pending, self.repredictions = labelled, pending, repredictions
            self._maybe_draw("evaluated")

    def close(self) -> None:
        """The results are in: the last line, with the final counts."""
        with self._lock:
            if self.has_replay and self.replay_seconds is None:
                self.replay_seconds = time.monotonic() - self.start
                self._draw("replay", force=True)
            if self.tty or self._shown != self._counts():  # the last line, not twice
                self._draw("evaluated", force=True)
            if self.enabled and self.tty and self._drawn:
                self.stream.write("\n")
                self.stream.flush()
            self.enabled = False

    def replay_counter(self) -> _ReplayCounter:
        """What a replay advances (``advance``, ``close``) in place of its own bar."""
        return _ReplayCounter(self)

    # -- drawing ----------------------------------------------------------------------------

    def replay_line(self, now: float) -> str:
        """``replay: 90,625/90,625 events, 30,000/s, done in 0:03``."""
        seconds = self.replay_seconds if self.replay_seconds is not None else now - self.start
        rate = self.events / max(seconds, 1e-9)
        total = f"/{self.replay_total:,}" if self.replay_total else ""
        state = f"done in {_clock(seconds)}" if self.replay_seconds is not None else "producing"
        return f"replay: {self.events:,}{total} events, {rate:,.0f}/s, {state}"

    def evaluated_line(self, now: float) -> str:
        """``evaluated: 12,000/45,312 labels, 310 pending, 0 re-predictions, 900/s ETA 0:37``."""
        expected = f"/{self.expected:,}" if self.expected else ""
        line = f"evaluated: {self.labelled:,}{expected} labels, {self.pending:,} pending"
        if self.repredictions:
            line += f", {self.repredictions:,} re-predictions"
        rate = self.labelled / max(now - self.start, 1e-9)  # since the run began
        line += f", {rate:,.0f}/s"
        if self.expected and rate > 0:
            line += f" ETA {_clock(max(0, self.expected - self.labelled) / rate)}"
        return line

    def _counts(self) -> tuple[int, int, int]:
        return self.labelled, self.pending, self.repredictions

    def _maybe_draw(self, which: str) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last[which] >= (0.1 if self.tty else self.log_every):
            self._draw(which, now=now)

    def _draw(self, which: str, *, now: float | None = None, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic() if now is None else now
        self._last[which] = now
        if which == "evaluated":
            self._shown = self._counts()
        if not self.tty:
            line = self.replay_line(now) if which == "replay" else self.evaluated_line(now)
            self.stream.write(line + "\n")
        else:  # both lines, in place: back to the first one if they are on screen
            lines = [self.evaluated_line(now)]
            if self.has_replay:
                lines.insert(0, self.replay_line(now))
            up = f"\x1b[{len(lines) - 1}A" if self._drawn and len(lines) > 1 else ""
            self.stream.write(up + "\r" + "\x1b[K\n".join(lines) + "\x1b[K")
            self._drawn = True
        self.stream.flush()


class _ReplayCounter:
    """The replay's side of a :class:`LabelProgress`: the interface of a
    :class:`~streameval.pipeline.progress.Progress`."""

    def __init__(self, progress: LabelProgress) -> None:
        self.progress = progress

    def advance(self, n: int = 1) -> None:
        self.progress.replayed(n)

    def close(self) -> None:
        self.progress.replay_done()

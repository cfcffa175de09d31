"""What a failing command prints and returns: one line on stderr and an exit code.

Three kinds of failure, three codes, so a script or a supervisor can tell them apart:

* :data:`EXIT_USAGE` (2) -- the input is wrong (an option's value, a config file,
  a dataset that does not exist, a ``--positive`` that is not one of the stream's
  classes): running it again will fail again;
* :data:`EXIT_BROKER` (75, ``EX_TEMPFAIL``) -- no Kafka broker answered at the
  address named in the line: try again once it is up;
* :data:`EXIT_FAILED` (1) -- the experiment itself failed (a learner raised on an
  instance): the input was valid, the run is not.

librdkafka writes its own log lines (``%3|...|FAIL|rdkafka#producer-1| ...``) to
the process's stderr from its C threads, one every reconnection attempt, before
any Python code can say what went wrong. :class:`QuietLibrdkafka` keeps them (and
the same lines routed through Python logging, ``FAIL [rdkafka#...]``) out of the
terminal; ``--verbose`` lets them through.

>>> is_librdkafka_line("%3|1795619394.125|FAIL|rdkafka#consumer-3| [thrd:x]: refused")
True
>>> is_librdkafka_line("FAIL [rdkafka#producer-1] [thrd:127.0.0.1:9/bootstrap]: refused")
True
>>> is_librdkafka_line("streameval submit: error: no Kafka broker answered at 127.0.0.1:9")
False
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from types import TracebackType
from typing import Any, TextIO

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_BROKER = 75

#: librdkafka's default log line (``%LEVEL|TIME|FAC|NAME| msg``) and its Python-logged form.
_LIBRDKAFKA = re.compile(rb"^(%\d\|\d+\.\d+\|[A-Z_]+\||[A-Z_]+ \[rdkafka#)")


def is_librdkafka_line(line: str | bytes) -> bool:
    """Whether ``line`` is one of librdkafka's own log lines."""
    data = line.encode() if isinstance(line, str) else line
    return _LIBRDKAFKA.match(data) is not None


def one_line(text: str) -> str:
    """``text`` on one line: its lines joined with ``; ``, blanks squeezed.

    >>> one_line("no broker\\n  --- tail ---\\nrefused")
    'no broker; --- tail ---; refused'
    """
    parts = [" ".join(line.split()) for line in str(text).splitlines()]
    return "; ".join(p for p in parts if p)


class _Filtered:
    """A text stream that drops each write that is a librdkafka log line (Python logging
    writes a record in one call) and passes every other write on at once."""

    def __init__(self, raw: TextIO) -> None:
        self._raw = raw

    def write(self, text: str) -> int:
        if not is_librdkafka_line(text):
            self._raw.write(text)
            self._raw.flush()
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


class QuietLibrdkafka:
    """While active, librdkafka's log lines do not reach the terminal.

    librdkafka writes to file descriptor 2 from C: the descriptor is redirected to
    a pipe whose reader thread forwards every other line. Python's ``sys.stderr``
    (and ``sys.__stderr__``) write straight to the terminal through a filter of
    their own, at once, so a line printed just before ``os._exit`` is not lost.
    """

    def __init__(self, fd: int = 2) -> None:
        self.fd = fd
        self._saved: int | None = None
        self._reader: threading.Thread | None = None
        self._read_end: int | None = None
        self._streams: tuple[Any, Any] | None = None

    def __enter__(self) -> QuietLibrdkafka:
        with contextlib.suppress(AttributeError, ValueError, OSError):
            sys.stderr.flush()
        read_end, write_end = os.pipe()
        self._saved = os.dup(self.fd)
        os.dup2(write_end, self.fd)
        os.close(write_end)
        self._read_end = read_end
        self._reader = threading.Thread(target=self._forward, name="streameval-stderr", daemon=True)
        # it only reads a pipe and writes a descriptor, holding no lock: a replay's child
        # may be forked beside it (streameval.agents.replay_process.can_fork)
        self._reader.fork_safe = True  # type: ignore[attr-defined]
        self._reader.start()
        raw = open(self._saved, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
        self._streams = (sys.stderr, sys.__stderr__)
        sys.stderr = sys.__stderr__ = _Filtered(raw)  # type: ignore[assignment,misc]
        return self

    def _forward(self) -> None:
        assert self._read_end is not None
        pending = b""
        while True:
            try:
                chunk = os.read(self._read_end, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            kept = b"".join(line + b"\n" for line in lines if not is_librdkafka_line(line))
            if kept:
                self._write(kept)
        if pending and not is_librdkafka_line(pending):
            self._write(pending)

    def _write(self, data: bytes) -> None:
        with contextlib.suppress(OSError, TypeError):
            os.write(self._saved, data)  # type: ignore[arg-type]

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._saved is None:
            return
        with contextlib.suppress(AttributeError, ValueError, OSError):
            sys.stderr.flush()
        if self._streams is not None:
            sys.stderr, sys.__stderr__ = self._streams  # type: ignore[misc]
        # the last reference to the pipe's write end goes (children started meanwhile
        # may hold one: the reader then stops waiting after a second)
        os.dup2(self._saved, self.fd)
        if self._reader is not None:
            self._reader.join(timeout=1.0)
            if self._reader.is_alive():
                return  # a child still writes there: the process's end closes both
        if self._read_end is not None:
            os.close(self._read_end)
        os.close(self._saved)
        self._saved = None


def exit_code(exc: BaseException) -> int | None:
    """The exit code of a command that raised ``exc``; ``None``: a bug, let it show its stack.

    >>> exit_code(ValueError("--limit must be at least 0")), exit_code(KeyError("x"))
    (2, None)
    """
    from streameval.pipeline.failure import LearnerFailed
    from streameval.pipeline.spec import SpecError

    failed: tuple[type[BaseException], ...] = (LearnerFailed,)
    broker: tuple[type[BaseException], ...] = ()
    try:
        from confluent_kafka import KafkaException

        from streameval.agents.broker import BrokerUnavailable
        from streameval.agents.codec import StreamFailed
        from streameval.agents.replay import ReplayError
    except ImportError:  # pragma: no cover - the Kafka layer is part of the distribution
        pass
    else:
        failed += (StreamFailed,)
        broker = (BrokerUnavailable, KafkaException, ReplayError)
    if isinstance(exc, failed):
        return EXIT_FAILED
    if isinstance(exc, broker):
        return EXIT_BROKER
    if isinstance(exc, (SpecError, ValueError, OSError, RuntimeError, TimeoutError)):
        return EXIT_USAGE
    return None

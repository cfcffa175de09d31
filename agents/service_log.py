"""A worker's log as a service's: one structured line per event, text or JSON.

An operator (or a log collector) reads a worker's stderr: it must say, one line each,
when a stream is defined, restored, finished or failed and when a checkpoint is
written, in a form a program can parse. :func:`configure` installs one handler on the
root logger, so Faust's, aiokafka's and streameval's own records all come out the same
way:

* ``text`` (the default): ``ts level logger event=... stream=... key=value ...``, values
  quoted when they hold spaces;
* ``json``: one object per line, with ``ts``, ``level``, ``logger``, ``message`` and the
  event's fields.

:func:`event` writes a record with an ``event`` name and its fields (``stream``,
``learners``, ``n_labelled``...); records of other libraries have only a message.

>>> import io, json
>>> out = io.StringIO()
>>> handler = make_handler("json", out)
>>> record = logging.LogRecord("streameval.worker", logging.INFO, "", 0, "", None, None)
>>> record.event, record.fields = "finished", {"stream": "s1", "n_labelled": 3}
>>> handler.emit(record)
>>> line = json.loads(out.getvalue())
>>> line["event"], line["stream"], line["n_labelled"], line["level"]
('finished', 's1', 3, 'info')
>>> print(TextFormatter().format(record)[24:])
 info streameval.worker event=finished stream=s1 n_labelled=3
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone
from typing import Any, TextIO

#: The log formats of ``--log-format``.
FORMATS = ("text", "json")

log = logging.getLogger("streameval.worker")


def _timestamp(record: logging.LogRecord) -> str:
    """The record's wall time in UTC, ISO 8601 to the millisecond (24 characters)."""
    when = datetime.fromtimestamp(record.created, tz=timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = getattr(record, "fields", None)
    return dict(fields) if isinstance(fields, dict) else {}


def _text_value(value: Any) -> str:
    """A value as ``key=value`` shows it: quoted (JSON) when it holds a space or quote."""
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    text = value if isinstance(value, str) else json.dumps(value)
    if not text or any(c in text for c in ' "=\n'):
        return json.dumps(text)
    return text


class TextFormatter(logging.Formatter):
    """``ts level logger [event=...] key=value ... [message]``: one line per record."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [_timestamp(record), record.levelname.lower(), record.name]
        name = getattr(record, "event", None)
        if name:
            parts.append(f"event={name}")
        parts += [f"{k}={_text_value(v)}" for k, v in _fields(record).items()]
        message = record.getMessage()
        if message:
            parts.append(message.replace("\n", " | "))
        if record.exc_info:
            parts.append("error=" + _text_value(self.formatException(record.exc_info)))
        return " ".join(parts)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``ts``, ``level``, ``logger``, ``event``, fields, ``message``."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        name = getattr(record, "event", None)
        if name:
            out["event"] = name
        out.update(_fields(record))
        message = record.getMessage()
        if message:
            out["message"] = message
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def make_handler(fmt: str, stream: TextIO | None = None) -> logging.Handler:
    """A stream handler (stderr by default) with the formatter of ``fmt`` (text or json)."""
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    return handler


def configure(fmt: str = "text", level: str | int = "warning") -> None:
    """Send every record at ``level`` or above to stderr in ``fmt``; the worker's own
    events (``streameval.worker``) are logged at info whatever ``level`` is."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "streameval", False)]:
        root.removeHandler(old)  # configured before: replaced, not doubled
    handler = make_handler(fmt)
    handler.streameval = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    log.setLevel(min(logging.INFO, root.level))


def event(
    name: str,
    stream: str | None = None,
    *,
    level: int = logging.INFO,
    message: str = "",
    **fields: Any,
) -> None:
    """Log the worker event ``name`` (``defined``, ``restored``, ``finished``...) with its
    fields and an optional sentence for people: one line."""
    values = {"stream": stream, **fields} if stream is not None else fields
    log.log(level, "%s", message, extra={"event": name, "fields": values})

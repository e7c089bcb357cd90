"""The server's log: one record per event on the ``kbench.serve`` logger, written as JSON Lines (one object a line:
``ts`` ISO-8601 UTC, ``level``, ``event``, then the event's own fields) or as text (``ts LEVEL event key=value``),
to stderr or a file. ``configure`` sends every other library's records (uvicorn, websockets, warnings) through the
same handler, so a JSON log holds nothing but JSON lines. ``logevents.py`` says which events the server writes.

Nothing here knows what a field holds: callers never pass the token or a candidate's source (``logevents.py``
passes a source's size and hash prefix only)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone

from kbench_env.pipeline.result import json_safe

LOGGER = logging.getLogger("kbench.serve")
LOGGER.addHandler(logging.NullHandler())  # a library: silent unless an application configures logging
LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("json", "text")


def event(name: str, level: int = logging.INFO, **fields) -> None:
    """Log the event ``name`` (snake_case) with ``fields`` (JSON-serialisable; anything else is logged as str)."""
    if LOGGER.isEnabledFor(level):
        LOGGER.log(level, name, extra={"kbench_fields": fields})


def _record_fields(record: logging.LogRecord) -> tuple[str, dict]:
    """The event's name and fields; another library's record is the event ``log`` with its logger and message."""
    fields = getattr(record, "kbench_fields", None)
    if fields is not None:
        name = record.msg
    else:
        name, fields = "log", {"logger": record.name, "message": record.getMessage()}
    fields = json_safe(fields)  # a new dict: the record's own stays as it was
    if record.exc_info:
        fields["exception"] = logging.Formatter().formatException(record.exc_info)
    return name, fields


def _timestamp(record: logging.LogRecord) -> str:
    stamp = datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``ts``, ``level``, ``event``, then the event's fields."""

    def format(self, record: logging.LogRecord) -> str:
        name, fields = _record_fields(record)
        line = {"ts": _timestamp(record), "level": record.levelname.lower(), "event": name}
        line.update((k, v) for k, v in fields.items() if k not in line)
        return json.dumps(line, default=str, allow_nan=False, separators=(",", ":"))


def _text_value(value) -> str:
    if isinstance(value, str) and value and not any(c.isspace() or c in '"=' for c in value):
        return value
    return json.dumps(value, default=str, allow_nan=False, separators=(",", ":"))


class TextFormatter(logging.Formatter):
    """A line for people: ``ts LEVEL event key=value ...`` (strings with spaces and structures as JSON)."""

    def format(self, record: logging.LogRecord) -> str:
        name, fields = _record_fields(record)
        exception = fields.pop("exception", None)
        parts = [_timestamp(record), record.levelname, name] + [f"{k}={_text_value(v)}" for k, v in fields.items()]
        return " ".join(parts) + ("\n" + exception if exception else "")


def configure(level: str = "info", fmt: str = "json", path: str | None = None) -> logging.Handler:
    """Write the server's events at ``level`` and up in ``fmt`` to ``path`` (appended) or stderr; other libraries'
    records go the same way from ``warning`` up (from ``debug`` when ``level`` is debug). Returns the handler."""
    if level not in LEVELS:
        raise ValueError(f"log level {level!r}: one of {', '.join(LEVELS)}")
    if fmt not in FORMATS:
        raise ValueError(f"log format {fmt!r}: one of {', '.join(FORMATS)}")
    handler = logging.FileHandler(path, encoding="utf-8") if path else logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    numeric = getattr(logging, level.upper())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric if numeric == logging.DEBUG else max(numeric, logging.WARNING))
    LOGGER.setLevel(numeric)
    logging.captureWarnings(True)  # warnings.warn's lines would otherwise reach stderr as plain text
    return handler

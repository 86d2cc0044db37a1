"""Log lines as JSON objects (``CORRAL_LOG_FORMAT=json``), one per line, for log collectors.

Each line has ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message`` and ``process``,
the traceback as ``exception`` when there is one, and every field a caller passed with
``extra=`` (the job runner passes ``job_id``, ``job_kind`` and ``vm_id``).
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime

# What every LogRecord carries; anything else on a record came from ``extra=``.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON, its ``extra=`` fields included."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in line:
                line[key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, default=str, ensure_ascii=False)


class RoutineTaskLines(logging.Filter):
    """Leaves out the task queue's (django-q's) line per task queued, taken and done, which
    come several a minute from the ticker alone while nothing happens: Corral's job runner says
    what each job does. Its start, stop and warnings stay; with ``LOG_LEVEL=DEBUG``, every
    line."""

    ROUTINE = re.compile(r"^(Enqueued \[|Processed '|Process-\S+ (processing|created task) )")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.INFO or logging.getLogger().isEnabledFor(logging.DEBUG):
            return True
        return not self.ROUTINE.match(record.getMessage())

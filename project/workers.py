"""Task workers: this worker's name, its task cluster's id, and the name a task function is
stored under (django-q2 keeps a queued or scheduled task by its dotted path)."""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Callable


def worker_name() -> str:
    """This process, as "host:pid" (a job's worker, a lock's holder)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def cluster_id() -> str:
    """This task cluster's id: its workers share the sentinel as their parent process."""
    return hashlib.sha1(f"{socket.gethostname()}:{os.getppid()}".encode()).hexdigest()[:16]


def task_path(task: Callable) -> str:
    """The dotted path django-q2 stores ``task`` under (a schedule's ``func`` needs it)."""
    return f"{task.__module__}.{task.__qualname__}"

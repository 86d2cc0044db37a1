"""Task workers: this worker's name, its task cluster's id, the name a task function is
stored under (django-q2 keeps a queued or scheduled task by its dotted path), and queueing a
task that may wait for a broker that is down."""

from __future__ import annotations

import hashlib
import logging
import os
import socket
from collections.abc import Callable

from redis import RedisError

logger = logging.getLogger(__name__)


def worker_name() -> str:
    """This process, as "host:pid" (a job's worker, a lock's holder)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def cluster_id() -> str:
    """This task cluster's id: its workers share the sentinel as their parent process."""
    return hashlib.sha1(f"{socket.gethostname()}:{os.getppid()}".encode()).hexdigest()[:16]


def task_path(task: Callable) -> str:
    """The dotted path django-q2 stores ``task`` under (a schedule's ``func`` needs it)."""
    return f"{task.__module__}.{task.__qualname__}"


def queue_task(task: Callable, *args, task_name: str) -> bool:
    """Queue ``task(*args)`` for a task worker; False (and a warning) when the broker cannot
    take it now (Redis restarting). For tasks that something else queues again later (a job's
    dispatch is retried by the reaper, a pool's nudge by the ticker's monitor run): whoever
    asked is answered as usual, not with an error for work that is committed."""
    from django_q.tasks import async_task

    try:
        async_task(task, *args, task_name=task_name)
    except (RedisError, OSError):
        logger.warning(
            "%s could not be queued now; it is queued again later", task_name, exc_info=True
        )
        return False
    return True

"""django-q2 entry point for hosts: the task that runs a job."""

from __future__ import annotations

from django.db import close_old_connections

from hosts import jobs
from hosts.operations import OPERATION_BY_KIND


def run_job(job_id: int) -> str:
    """The task that runs one job: the runner with the operation of each job kind."""
    close_old_connections()
    return jobs.run(job_id, OPERATION_BY_KIND)

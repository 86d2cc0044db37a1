"""Retention of finished jobs: jobs that ended longer ago than ``CORRAL_JOB_RETENTION_HOURS``
go, with their journals; a job still queued or running is never touched."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from hosts.models import Job
from hosts.models.jobs import FINISHED_JOB_STATES

# Jobs deleted per statement: a backlog goes in short transactions.
PRUNE_BATCH = 1000


def prune_finished(older_than: timedelta | None = None) -> int:
    """Delete jobs that finished more than ``older_than`` (default: the retention setting)
    ago, and their journals; returns how many jobs went."""
    older_than = older_than or timedelta(hours=settings.CORRAL_JOB_RETENTION_HOURS)
    expired = Job.objects.filter(
        state__in=FINISHED_JOB_STATES, finished_at__lt=timezone.now() - older_than
    )
    deleted = 0
    while True:
        batch = list(expired.order_by("id").values_list("id", flat=True)[:PRUNE_BATCH])
        if not batch:
            return deleted
        # Re-checked in the DELETE itself: a job is never deleted unless finished.
        Job.objects.filter(pk__in=batch, state__in=FINISHED_JOB_STATES).delete()
        deleted += len(batch)

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class HostsConfig(AppConfig):
    name = "hosts"
    verbose_name = "Inventory"
    api_urls = "hosts.api.urls"
    portal_urls = "hosts.urls"

    def ready(self) -> None:
        from django_q.signals import post_spawn

        # Importing operations registers each with the job runner by its kind.
        from hosts import dashboard, demo, jobs, metrics, operations, roles  # noqa: F401
        from project import events, loops, scopes
        from project import metrics as project_metrics

        scopes.register("cluster", "hosts.Cluster", rank=10)
        scopes.register("vm", "hosts.VirtualMachine", rank=40)
        roles.register()
        for object_type, action in {
            "vm": "hosts.view_virtualmachine",
            "job": "hosts.view_job",
            "host": "hosts.view_host",
            "cluster": "hosts.view_cluster",
        }.items():
            events.register_object_type(object_type, action)
        project_metrics.register(metrics.collect)
        project_metrics.allow_scraping_with("hosts.view_host")
        dashboard.register()
        loops.register("reap", jobs.reap)
        demo.register()
        post_migrate.connect(ensure_schedules, sender=self, dispatch_uid="corral-schedules")
        post_spawn.connect(revive_ticker, dispatch_uid="corral-revive-ticker")


def ensure_schedules(**kwargs) -> None:
    """The ticker's safety net: a schedule every minute revives it if its chain broke."""
    from django_q.models import Schedule

    Schedule.objects.update_or_create(
        name="corral-ticker",
        defaults={
            "func": "hosts.tasks.tick",
            "schedule_type": Schedule.MINUTES,
            "minutes": 1,
            "repeats": -1,
        },
    )


def revive_ticker(sender=None, proc_name: str = "", **kwargs) -> None:
    """A task worker started (a cluster started or restarted): make sure a ticker runs."""
    import hashlib
    import os
    import socket

    from hosts.tasks import TICKER_LOCK, queue_tick
    from project import loops

    try:
        # Every worker of a starting cluster gets here; one queued ticker is enough. The lock
        # is the cluster's own (its workers share the sentinel as parent): a cluster started
        # right after another one died must not wait for the dead one's lock to expire.
        cluster = hashlib.sha1(f"{socket.gethostname()}:{os.getppid()}".encode()).hexdigest()
        if loops.acquire(f"{TICKER_LOCK}-revival-{cluster[:16]}", proc_name or "worker", ttl=15):
            loops.forget_expired(f"{TICKER_LOCK}-revival-")
            queue_tick()
    except Exception:  # the broker may not be reachable yet; the schedule catches up
        import logging

        logging.getLogger(__name__).exception("could not queue the ticker")

"""django-q2 entry points for pools: the prestart monitor (on a nudge, and from the ticker)."""

from django.conf import settings
from django.db import close_old_connections

from pools import monitor
from project import loops


def monitor_pool(pool_id: int) -> int:
    close_old_connections()
    return monitor.run_nudged(pool_id)


def register() -> None:
    """The prestart monitor over every pool, every VMPOOL_MONITOR_INTERVAL seconds."""
    loops.register(
        "pool-monitor", monitor.monitor_all, every=lambda: settings.VMPOOL_MONITOR_INTERVAL
    )

"""django-q2 entry points for pools: the prestart monitor (on a nudge, and from the ticker)."""

from django.db import close_old_connections

from pools import services


def monitor_pool(pool_id: int) -> int:
    close_old_connections()
    return services.monitor_pool(pool_id)


def monitor_all() -> dict:
    close_old_connections()
    return services.monitor_all()

"""The pools' Prometheus figures: prestarted VMs against each pool's target."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from prometheus_client.core import GaugeMetricFamily, Metric

from pools.models import VmPool


def collect(now: datetime) -> Iterator[Metric]:
    rows = (
        VmPool.objects.with_counts()
        .order_by("name")
        .values_list("name", "prestarted_vms", "prestarted_now")
    )
    prestarted = GaugeMetricFamily(
        "corral_pool_prestarted",
        "The pool's VMs counted as prestarted: unassigned, not held, and running, paused, "
        "starting or unknown (what the prestart monitor counts).",
        labels=["pool"],
    )
    target = GaugeMetricFamily(
        "corral_pool_prestarted_target",
        "How many VMs the pool keeps running and unassigned (prestarted_vms).",
        labels=["pool"],
    )
    below = 0
    for name, wanted, have in rows:
        prestarted.add_metric([name], have)
        target.add_metric([name], wanted)
        if have < wanted:
            below += 1
    yield prestarted
    yield target
    yield GaugeMetricFamily(
        "corral_pools_below_level",
        "Pools with fewer prestarted VMs than they should keep.",
        value=below,
    )

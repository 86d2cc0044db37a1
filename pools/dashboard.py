"""The pools' section of the admin dashboard: pools below their prestarted level."""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import reverse

from pools.admin import below_prestarted
from pools.models import VmPool
from project import dashboard
from project.access.permissions import restrict

SHOWN_POOLS = 10


@dataclass
class ShortPool:
    name: str
    prestarted: int
    wanted: int
    url: str


def short_pools(request, now) -> dict:
    pools = below_prestarted(
        restrict(VmPool.objects.all(), request.user, "pools.view_vmpool").with_counts()
    ).order_by("name")
    rows = list(pools.values("pk", "name", "prestarted_vms", "prestarted_now")[: SHOWN_POOLS + 1])
    count = len(rows) if len(rows) <= SHOWN_POOLS else pools.count()
    return {
        "count": count,
        "url": f"{dashboard.changelist(VmPool)}?prestarted=short",
        "shown": [
            ShortPool(
                name=row["name"],
                prestarted=row["prestarted_now"],
                wanted=row["prestarted_vms"],
                url=reverse("admin:pools_vmpool_change", args=[row["pk"]]),
            )
            for row in rows[:SHOWN_POOLS]
        ],
    }


def register() -> None:
    dashboard.register(
        "pools",
        model_label="pools.VmPool",
        template="admin/corral/dashboard/pools.html",
        compute=short_pools,
        rank=30,
    )

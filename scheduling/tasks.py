"""The balancer loop: every cluster's balancer, every CORRAL_BALANCE_INTERVAL seconds (a cluster
never balanced is due at once), run by the ticker."""

from __future__ import annotations

import logging

from django.conf import settings

from hosts.models import Cluster
from project import loops
from scheduling.balancer import balance_cluster

logger = logging.getLogger(__name__)


def balance(cluster_id: int) -> dict:
    """One run of a cluster's balancer (a migrate job if it chose to move a VM)."""
    outcome = balance_cluster(cluster_id)
    if outcome.get("action") == "migrate":
        logger.info("balancer: %s", outcome)
    return outcome


def register() -> None:
    loops.register(
        "balance",
        balance,
        every=lambda: settings.CORRAL_BALANCE_INTERVAL,
        keys=lambda: Cluster.objects.values_list("pk", flat=True),
    )

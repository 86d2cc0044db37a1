"""The leases' part of the demo: one of the demo cluster's hosts is reservable, so a first
lease fits.

The simulated hosts are registered before the demo is seeded (``manage.py devstack`` starts
them first) and nothing runs on them yet; the last one by name goes to the free pool of
leases, the others keep the pool's and the plain VMs.
"""

from hosts.models import Host
from leases.free_pool import HostRefused, make_reservable
from project import demo


def seed(options: dict) -> str:
    cluster = options["cluster_obj"]
    hosts = list(Host.objects.filter(cluster=cluster).order_by("-name"))
    reservable = next((host for host in hosts if host.reservable), None)
    if reservable is not None:
        return f"Demo: host {reservable.name} is reservable (leases take capacity there)."
    if len(hosts) < 2:
        return (
            f"Demo: no host reservable: cluster {cluster.name} has {len(hosts)} host(s), and "
            "the pool and the plain VMs need one of their own."
        )
    for host in hosts:
        try:
            make_reservable(host, {})
        except HostRefused:
            continue  # VMs of an earlier run are defined on it
        return f"Demo: host {host.name} is reservable (leases take capacity there)."
    return f"Demo: no host reservable: VMs outside leases are defined on every host of {cluster}."


def register() -> None:
    # After the inventory (it makes the cluster), before the pool (its VMs are placed later,
    # by the scheduler, which keeps them off reservable hosts anyway).
    demo.register("leases", seed, rank=15)

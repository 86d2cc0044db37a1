"""Fixtures for the lease tests: reservable hosts made as rows, lease users, reservation
requests in Blazar's shape, and times in the days ahead. Loaded for the whole suite
(tests/conftest.py): the portal, admin, browser and reliability tests use them too.

Hosts are rows with the capacity a sync would have read (16 CPUs, 3072 MiB, Up): with the
default overcommit (4 vCPUs per CPU, no memory overcommit) one host holds three instances of
1024 MiB, the size most tests reserve.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from hosts.models import Cluster, Host
from leases import services
from leases.models import Lease
from tests.conftest import unique

# Midnight (UTC) two days ahead: every test's windows are in the future for its whole run.
DAY = (
    (timezone.now() + timedelta(days=2))
    .astimezone(UTC)
    .replace(hour=0, minute=0, second=0, microsecond=0)
)
PER_HOST = 3  # instances of 1024 MiB on a 3072 MiB host


def at(hour: float, day: int = 0) -> datetime:
    """``hour`` o'clock (fractions are minutes) on the ``day``-th day after DAY."""
    return DAY + timedelta(days=day, hours=hour)


def instances(amount: int, *, vcpus: int = 1, memory_mb: int = 1024, affinity=None, **props):
    """A virtual:instance reservation request; keyword extras are host properties."""
    return {
        "resource_type": "virtual:instance",
        "vcpus": vcpus,
        "memory_mb": memory_mb,
        "disk_gb": 10,
        "amount": amount,
        "affinity": affinity,
        "host_properties": props,
    }


def whole_hosts(minimum: int, maximum: int | None = None, **props):
    """A physical:host reservation request; keyword extras are host properties."""
    return {
        "resource_type": "physical:host",
        "min": minimum,
        "max": maximum or minimum,
        "host_properties": props,
    }


@pytest.fixture
def reservable_hosts(db, make_cluster):
    """reservable_hosts(count=1, cluster=None, **fields) -> Up reservable hosts of 16 CPUs and
    3072 MiB (fields override), in a new cluster unless one is given."""

    def add(count: int = 1, cluster: Cluster | None = None, **fields) -> list[Host]:
        cluster = cluster or make_cluster()
        values = {"status": "up", "cpus": 16, "memory_mb": 3072, "reservable": True, **fields}
        return [
            Host.objects.create(
                cluster=cluster,
                name=unique("rhost"),
                uri=f"qemu+ssh://root@{unique('rnode')}.example.org/system",
                **values,
            )
            for _ in range(count)
        ]

    return add


@pytest.fixture
def lease_user(make_user, grant):
    """lease_user() -> a user holding LeaseUser (may create leases)."""

    def make(username: str | None = None):
        user = make_user(username)
        grant(user, "LeaseUser")
        return user

    return make


@pytest.fixture
def make_lease(lease_user):
    """make_lease(start, end, *requests, owner=None, **fields) -> a lease accepted by
    create_lease (its allocations planned, its events scheduled)."""

    def make(start: datetime, end: datetime, *requests, owner=None, **fields) -> Lease:
        return services.create_lease(
            owner=owner or lease_user(),
            name=fields.pop("name", unique("lease")),
            start=start,
            end=end,
            reservations=[dict(r) for r in requests],
            **fields,
        )

    return make


def allocations_of(lease: Lease) -> dict[str, int]:
    """Host name -> instance slots the lease holds there (whole hosts count as 0 slots)."""
    held: dict[str, int] = {}
    for reservation in lease.reservations.all():
        for allocation in reservation.allocations.select_related("host"):
            held[allocation.host.name] = held.get(allocation.host.name, 0) + allocation.slots
    return held

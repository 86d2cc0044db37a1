"""Lease benchmarks: does a new lease fit, with a year of accepted reservations stored?

The scenario builds its own reservable hosts (names and URIs of its own); other scenarios'
hosts are not reservable, so they do not count.
"""

import random
from datetime import timedelta
from itertools import count

from django.contrib.auth import get_user_model
from django.utils import timezone

from hosts.models import Cluster, Host
from leases import services
from leases.capacity import plan
from leases.models import Allocation, Lease, Reservation, ReservationStatus

User = get_user_model()
_serial = count(1)

HOSTS, RESERVATIONS, LANES = 50, 10_000, 2
SIZE = {"resource_type": "virtual:instance", "vcpus": 1, "memory_mb": 1024, "disk_gb": 10}


def _year_of_leases(hosts: list[Host], owner) -> None:
    """RESERVATIONS accepted one-instance leases over the next year, on every host in LANES
    back-to-back sequences of windows a few days long: at most two of a host's three slots
    (1024 MiB of 3072) are ever taken, so the schedule is valid and a third slot stays free."""
    chance = random.Random(3)
    year_start = timezone.now() + timedelta(days=1)
    per_lane = RESERVATIONS // (len(hosts) * LANES)
    lane_length = timedelta(days=365) / per_lane
    windows = []
    for host in hosts:
        for _ in range(LANES):
            at = year_start + lane_length * chance.random()
            for _ in range(per_lane):
                length = lane_length * chance.uniform(0.3, 1.0)
                windows.append((host, at, at + length))
                at += lane_length
    leases = Lease.objects.bulk_create(
        (
            Lease(
                name=f"year-{i}",
                owner=owner,
                start_date=start,
                end_date=end,
                before_end_date=end - timedelta(hours=1),
            )
            for i, (_, start, end) in enumerate(windows)
        ),
        batch_size=2000,
    )
    reservations = Reservation.objects.bulk_create(
        (
            Reservation(
                lease=lease,
                status=ReservationStatus.PENDING,
                amount=1,
                **SIZE,
            )
            for lease in leases
        ),
        batch_size=2000,
    )
    Allocation.objects.bulk_create(
        (
            Allocation(reservation=reservation, host=host, slots=1)
            for reservation, (host, _, _) in zip(reservations, windows, strict=True)
        ),
        batch_size=2000,
    )


def lease_capacity_check(measure):
    """A capacity check and a lease creation among 10,000 accepted reservations."""
    tag = f"leases{next(_serial)}"
    cluster = Cluster.objects.create(name=tag)
    hosts = Host.objects.bulk_create(
        Host(
            name=f"{tag}-h{i}",
            cluster=cluster,
            uri=f"qemu+ssh://root@{tag}-h{i}/system",
            status="up",
            cpus=16,
            memory_mb=3072,
            reservable=True,
        )
        for i in range(HOSTS)
    )
    owner, _ = User.objects.get_or_create(username=f"{tag}-owner")
    _year_of_leases(hosts, owner)
    middle = timezone.now() + timedelta(days=180)
    rows = []
    for days in (7, 31):
        start, end = middle, middle + timedelta(days=days)
        request = {**SIZE, "amount": HOSTS, "affinity": None}
        ms, queries = measure(lambda s=start, e=end, r=request: plan(s, e, [r], lock=False))
        rows.append(
            (
                f"lease check, {HOSTS} instances over {days} days "
                f"({RESERVATIONS:,} reservations, {HOSTS} hosts)",
                f"{ms:.1f} ms, {queries} queries",
                "<= 100 ms",
                "yes" if ms <= 100 else "NO",
            )
        )
    made = []

    def create():
        made.append(
            services.create_lease(
                owner=owner,
                name=f"{tag}-new-{len(made)}",
                start=middle,
                end=middle + timedelta(days=31),
                reservations=[{**SIZE, "amount": 5, "affinity": None}],
            )
        )

    ms, queries = measure(create)
    rows.append(
        (
            f"create_lease, 5 instances over 31 days ({RESERVATIONS:,} reservations)",
            f"{ms:.1f} ms, {queries} queries",
            "<= 100 ms",
            "yes" if ms <= 100 else "NO",
        )
    )
    return rows

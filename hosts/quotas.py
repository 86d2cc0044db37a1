"""Quotas: each user's effective limits, what they use, and the one check that counts a
request against both, atomically (``charge``).

A user's limit on a resource is the most generous of the quota rows that apply to them (their
own, each of their groups', the default row) and the ``CORRAL_QUOTA_*`` settings where no
default row sets it; superusers have none. The same rows limit what a user's leases reserve
at once (``lease_limits``, the ``LEASE_QUOTA_*`` settings their defaults), which the leases
app checks over a lease's window. What a user uses is what they hold: the VMs they
own (a pool's VM counts for its holder while they hold it, for allocation makes them its
owner) and the images they own.

Every path that makes or hands out something a quota limits calls ``charge`` (or, on the pool
allocation's fast path, ``lock_limits`` and ``check`` with the use read in its own statement)
inside its transaction, before it writes: the user's row is locked first, so one user's
concurrent requests take turns and the use each reads is exact.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Count, Sum

from hosts.error_codes import HostErrorCode
from hosts.models import Image, Quota, VirtualMachine, VmSnapshot
from hosts.models.quotas import (
    LEASE_RESOURCE_NAMES,
    LEASE_RESOURCES,
    RESOURCE_NAMES,
    RESOURCES,
    UNLIMITED,
)
from project.access.permissions import holds_at_system
from project.errors import Refused

GIB = 1024**3


@dataclass(frozen=True)
class Resources:
    """An amount of each limited resource: what a request asks for, or what a user uses.
    ``image_gb`` is in GiB, fractions kept (images are measured in bytes); ``disk_gb`` counts
    the VMs' disks and what their snapshots may come to hold."""

    vms: int = 0
    vcpus: int = 0
    memory_mb: int = 0
    disk_gb: int = 0
    images: int = 0
    image_gb: float = 0
    snapshots: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            **{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        )


# A user's effective limits by resource; None: unlimited.
Limits = dict[str, int | None]


class QuotaExceeded(Refused):
    """A request that would take a user past one of their limits (409 in the API, with
    ``code``, ``resource``, ``limit``, ``used`` and ``requested`` beside the message)."""

    def __init__(self, resource: str, *, limit: int, used: float, requested: float) -> None:
        label, unit = LABELS[resource]
        message = (
            f"Quota exceeded for {label}: requested {amount(requested)}{unit}, "
            f"but already used {amount(used)} of {limit}{unit}."
        )
        details = {
            "code": HostErrorCode.QUOTA_EXCEEDED.value,
            "resource": resource,
            "limit": limit,
            "used": used,
            "requested": requested,
        }
        super().__init__(HostErrorCode.QUOTA_EXCEEDED, message, details=details)
        self.resource, self.limit, self.used, self.requested = resource, limit, used, requested


LABELS = {name: (label, unit) for name, label, unit in RESOURCES}


def amount(value: float) -> str:
    """A count as it is; a size in GB to two decimals (an image of a few MB is not 0 GB)."""
    if not isinstance(value, float):
        return str(value)
    if 0 < value < 0.01:
        return "less than 0.01"
    return f"{value:.2f}".rstrip("0").rstrip(".")


def for_vm(vm: VirtualMachine) -> Resources:
    """What holding ``vm`` counts: one VM, its vCPUs, memory and disk."""
    return Resources(vms=1, vcpus=vm.vcpus, memory_mb=vm.memory_mb, disk_gb=vm.disk_gb)


HARDWARE = ("vcpus", "memory_mb", "disk_gb")


def for_growth(stored: dict, wanted: dict) -> Resources:
    """What changing a VM's hardware from ``stored`` to ``wanted`` (``HARDWARE`` values; one
    not wanted stays) adds to its holder's use: only what grows; what shrinks frees its share
    once saved."""
    return Resources(**{n: max(0, wanted.get(n, stored[n]) - stored[n]) for n in HARDWARE})


def for_snapshot(vm: VirtualMachine, memory: bool) -> Resources:
    """What a snapshot of ``vm`` counts: one snapshot, and as much disk as it may come to
    hold: the VM's disk (every block may change after it), and its memory when saved with
    it."""
    return Resources(snapshots=1, disk_gb=snapshot_disk_gb(vm, memory))


def snapshot_disk_gb(vm: VirtualMachine, memory: bool) -> int:
    return vm.disk_gb + (math.ceil(vm.memory_mb / 1024) if memory else 0)


def for_image(size_bytes: int) -> Resources:
    """What owning an image of ``size_bytes`` counts (for the image paths)."""
    return Resources(images=1, image_gb=size_bytes / GIB)


# -- limits ------------------------------------------------------------------------------------


def default_limits() -> Limits:
    """The limits of everyone with no default row: the ``CORRAL_QUOTA_*`` settings."""
    return {name: getattr(settings, f"CORRAL_QUOTA_{name.upper()}") for name in RESOURCE_NAMES}


def default_lease_limits() -> Limits:
    """What everyone's leases may reserve at once where no default row sets it: the
    ``LEASE_QUOTA_*`` settings (0: no limit)."""
    return {name: getattr(settings, setting) or None for name, setting, _ in LEASE_RESOURCES}


def _effective(rows: list[tuple], is_superuser: bool, names, fallback: Limits) -> Limits:
    """The most generous of each limit in ``names`` over ``rows`` (quota id, user id, group
    id, then the limits in ``names`` order), the default row's or ``fallback``'s included."""
    if is_superuser:
        return dict.fromkeys(names)
    limits: Limits = {}
    for index, name in enumerate(names, start=3):
        values, default = [], fallback[name]
        for row in rows:
            if row[0] is None or row[index] is None:
                continue
            if row[1] is None and row[2] is None:
                default = None if row[index] == UNLIMITED else row[index]
            else:
                values.append(row[index])
        values.append(UNLIMITED if default is None else default)
        limits[name] = None if UNLIMITED in values else max(values)
    return limits


def _limits_sql(lock: bool, names=RESOURCE_NAMES) -> str:
    User = get_user_model()
    users, quotas = User._meta.db_table, Quota._meta.db_table
    memberships = User.groups.through._meta.db_table
    columns = ", ".join(f"q.{name}" for name in names)
    locking = " FOR UPDATE OF u" if lock and connection.features.has_select_for_update_of else ""
    return (
        f"SELECT u.is_superuser, q.id, q.user_id, q.group_id, {columns}"
        f" FROM {users} u LEFT JOIN {quotas} q ON q.user_id = u.id"
        f"  OR q.group_id IN (SELECT m.group_id FROM {memberships} m WHERE m.user_id = u.id)"
        f"  OR (q.user_id IS NULL AND q.group_id IS NULL)"
        f" WHERE u.id = %s{locking}"
    )


def _read_limits(user, *, lock: bool, names=RESOURCE_NAMES, fallback=None) -> Limits:
    fallback = default_limits() if fallback is None else fallback
    with connection.cursor() as cursor:
        cursor.execute(_limits_sql(lock, names), [user.pk])
        rows = cursor.fetchall()
    if not rows:
        return fallback
    return _effective([row[1:] for row in rows], bool(rows[0][0]), names, fallback)


def effective_limits(user) -> Limits:
    """``user``'s limit on each resource (None: unlimited), in one statement."""
    return _read_limits(user, lock=False)


def lock_limits(user) -> Limits:
    """Lock ``user``'s row (inside the caller's transaction: their other requests that count
    against their quota wait for it to end) and read their effective limits, in one
    statement. What ``charge`` starts with, and what pool allocation takes in place of the
    row lock it took anyway."""
    return _read_limits(user, lock=True)


def lease_limits(user) -> Limits:
    """What ``user``'s leases may reserve at once (``lease_instances``, ``lease_vcpus``,
    ``lease_memory_mb``; None: unlimited), by the same rules as their other limits, in one
    statement. The leases app checks them over a lease's window (``leases.services``)."""
    return _read_limits(
        user, lock=False, names=LEASE_RESOURCE_NAMES, fallback=default_lease_limits()
    )


# -- use ---------------------------------------------------------------------------------------


def usage(user) -> Resources:
    """What ``user`` holds now: the VMs they own (pool VMs they hold among them), the images
    they own and the snapshots they took (their disk counted with the VMs')."""
    vms = VirtualMachine.objects.filter(owner=user).aggregate(
        vms=Count("pk"), vcpus=Sum("vcpus"), memory_mb=Sum("memory_mb"), disk_gb=Sum("disk_gb")
    )
    held = Image.objects.filter(owner=user).aggregate(n=Count("pk"), size=Sum("size_bytes"))
    images = {"images": held["n"], "image_gb": (held["size"] or 0) / GIB}
    taken = VmSnapshot.objects.filter(owner=user).aggregate(n=Count("pk"), disk=Sum("disk_gb"))
    vms["disk_gb"] = (vms["disk_gb"] or 0) + (taken["disk"] or 0)
    return Resources(
        **{name: value or 0 for name, value in vms.items()}, **images, snapshots=taken["n"]
    )


def vm_usage_columns(user) -> tuple[str, list]:
    """The VM part of ``user``'s use as select-list columns ``quota_vms``, ``quota_vcpus``,
    ``quota_memory_mb``, ``quota_disk_gb`` and their parameters: for a statement that runs
    anyway (pool allocation's pick) to read it with no statement of its own."""
    vms, snapshots = VirtualMachine._meta.db_table, VmSnapshot._meta.db_table
    columns = [
        f"(SELECT {aggregate} FROM {vms} o WHERE o.owner_id = %s) AS quota_{name}"
        for name, aggregate in (
            ("vms", "COUNT(*)"),
            ("vcpus", "COALESCE(SUM(o.vcpus), 0)"),
            ("memory_mb", "COALESCE(SUM(o.memory_mb), 0)"),
        )
    ]
    columns.append(
        f"(SELECT COALESCE(SUM(o.disk_gb), 0) FROM {vms} o WHERE o.owner_id = %s)"
        f" + (SELECT COALESCE(SUM(s.disk_gb), 0) FROM {snapshots} s WHERE s.owner_id = %s)"
        " AS quota_disk_gb"
    )
    return ", ".join(columns), [user.pk] * (len(columns) + 1)


def vm_usage_of(row) -> Resources:
    """The use read by ``vm_usage_columns`` from the object (a raw query's model) carrying it."""
    return Resources(
        vms=row.quota_vms,
        vcpus=row.quota_vcpus,
        memory_mb=row.quota_memory_mb,
        disk_gb=row.quota_disk_gb,
    )


# -- the check ---------------------------------------------------------------------------------


def check(limits: Limits, used: Resources, requested: Resources) -> None:
    """Refuse (``QuotaExceeded``, on the first resource in ``RESOURCES`` order) when
    ``requested`` on top of ``used`` passes a limit. Only what is requested is checked: a
    user over a limit lowered since may still take what does not count against it."""
    for name in RESOURCE_NAMES:
        wanted, limit = getattr(requested, name), limits[name]
        if wanted and limit is not None and getattr(used, name) + wanted > limit:
            raise QuotaExceeded(name, limit=limit, used=getattr(used, name), requested=wanted)


def charge(user, requested: Resources) -> None:
    """Count ``requested`` against ``user``'s quota, or refuse it (``QuotaExceeded``).

    Call it inside the transaction that then makes or hands out what was requested, before
    writing it: the user's row stays locked until that transaction ends, so concurrent
    requests of one user can never pass a limit together. Two statements; none for nobody
    (``user`` None: made by the system)."""
    if user is None:
        return
    limits = lock_limits(user)
    if all(limit is None for limit in limits.values()):
        return
    check(limits, usage(user), requested)


@dataclass(frozen=True)
class QuotaLine:
    """One resource of a user's quota, as the API and the portal show it."""

    resource: str
    label: str
    unit: str
    limit: int | None
    used: int  # image storage rounded up to a whole GiB

    @property
    def percent(self) -> int | None:
        if self.limit is None:
            return None
        if self.limit == 0:
            return 100
        return min(100, round(100 * self.used / self.limit))


def quota_of(user) -> list[QuotaLine]:
    """Each resource's limit and use for ``user`` (two statements)."""
    limits, used = effective_limits(user), asdict(usage(user))
    return [
        QuotaLine(name, label, unit.strip(), limits[name], math.ceil(used[name]))
        for name, label, unit in RESOURCES
    ]


def may_set_quotas(user) -> bool:
    """Whether ``user`` sets anyone's limits (the admin console, Nova's ``os-quota-sets``): a
    system-wide grant of ``hosts.change_quota``."""
    return holds_at_system(user, "hosts.change_quota")


def may_see_quotas(user) -> bool:
    """Whether ``user`` sees anyone's limits and use, not only their own."""
    return holds_at_system(user, "hosts.view_quota") or may_set_quotas(user)


def default_row_limits() -> Limits:
    """What applies to someone with no row of their own and no group's: the default row's
    limits, the ``CORRAL_QUOTA_*`` and ``LEASE_QUOTA_*`` settings where it sets none (None:
    unlimited)."""
    limits = {**default_limits(), **default_lease_limits()}
    row = Quota.objects.filter(user__isnull=True, group__isnull=True).first()
    for name in limits:
        value = getattr(row, name, None)
        if value is not None:
            limits[name] = None if value == UNLIMITED else value
    return limits

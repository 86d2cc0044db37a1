"""Whether hosts share storage as they are set to: checked against what their pools show.

A host set to share storage (``Host.shared_storage``, a name) says its pool's folder is the
folder of every other host set to the same name. Every ``CORRAL_STORAGE_CHECK_INTERVAL``, and
at the next sync after its storage settings change, the sync puts the host's mark in its pool
(a volume named after its ``storage_marker``) and reads the marks there: the hosts whose
marks it sees share its folder. The host's ``storage_problem`` then says what is at odds with
its setting: hosts of its name whose marks are missing (set to share, but not sharing), and
hosts whose marks are there but are not of its name (sharing, but not set to: a disk copied
between them would replace itself). A problem is an alert on the host when it appears.

A VM moves between two hosts only after a check of its own at that moment
(``hosts.operations.disks.storage_shared``); this one is for the admins, before any VM does.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from hosts.models import Host

# What changes which folder a host's pool is, or which hosts it should share it with.
STORAGE_SETTINGS = ("uri", "storage_pool", "storage_path", "shared_storage")


def check_due(host: Host, now: datetime) -> bool:
    """Whether this sync of ``host`` checks which hosts share its pool's folder."""
    checked = host.storage_checked_at
    interval = timedelta(seconds=settings.CORRAL_STORAGE_CHECK_INTERVAL)
    return checked is None or checked <= now - interval


def problem(host: Host, seen: frozenset[str], read_at: datetime) -> str:
    """What the marks in the host's pool folder (``seen``: their markers, read from
    ``read_at`` on) show at odds with its shared storage setting; "" when nothing is. Only
    hosts whose own check was recorded before that can be missed (their marks are there from
    their first check on); marks of hosts Corral does not know (deleted, or from before a
    change of their settings) are left out."""
    others = Host.objects.exclude(pk=host.pk)
    name = host.shared_storage
    unset = [
        f"{other_name} ({other_share or 'no shared storage'})"
        for other_name, other_share in others.filter(storage_marker__in=seen)
        .order_by("name")
        .values_list("name", "shared_storage")
        if not name or other_share != name
    ]
    missing = []
    if name:
        missing = list(
            others.filter(shared_storage=name, storage_checked_at__lt=read_at)
            .exclude(storage_marker__in=seen)
            .order_by("name")
            .values_list("name", flat=True)
        )
    found = []
    if unset:
        found.append(
            f"its storage pool {host.storage_pool} is also the pool of {_names(unset)}, which "
            f"{'is' if len(unset) == 1 else 'are'} not set to share storage "
            f"{name or 'with it'}"
        )
    if missing:
        found.append(
            f"it is set to share storage {name} with {_names(missing)}, but its storage pool "
            f"{host.storage_pool} is not {'its' if len(missing) == 1 else 'their'} pool's folder"
        )
    return ("; ".join(found).capitalize() + ".")[:500] if found else ""


def _names(names: list[str], most: int = 5) -> str:
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def alert_text(host: Host, found: str) -> str:
    return f"Host {host.name} does not share storage as set: {found}"


def before_host_saved(sender, instance: Host, raw=False, update_fields=None, **kwargs) -> None:
    """``pre_save`` of hosts (the API, the admin console): a change to where its pool is, or to
    what it shares it with, gets the host a new marker (a mark it left in a folder it no longer
    uses then counts no more) and a check at its next sync; so do the hosts with a problem,
    which may be about this one, once the change is committed. Saves of chosen fields are
    Corral's own partial writes, never such a change."""
    if raw or instance._state.adding or update_fields is not None:
        return
    before = Host.objects.filter(pk=instance.pk).values(*STORAGE_SETTINGS).first()
    if before is None or all(before[f] == getattr(instance, f) for f in STORAGE_SETTINGS):
        return
    instance.storage_marker = uuid.uuid4()
    instance.storage_checked_at = None
    transaction.on_commit(
        lambda: Host.objects.exclude(storage_problem="").update(storage_checked_at=None)
    )

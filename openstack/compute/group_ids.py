"""The ids Nova's API gives server groups: an affinity group's, a UUID that holds the group's
key, and an instance reservation's, the group Blazar makes for a reservation with an affinity
(Blazar's API names it as the reservation's ``server_group_id``)."""

from __future__ import annotations

import re
import uuid

from leases.models import Reservation, ResourceType
from scheduling.models import AffinityGroup

# An affinity group's id: a UUID of version 8 (vendor-defined) that holds the group's key.
GROUP_ID = "a771717e-0000-8000-8000-{:012x}"
GROUP_ID_PATTERN = re.compile(r"a771717e-0000-8000-8000-([0-9a-f]{12})")


def affinity_group_id(group: AffinityGroup) -> str:
    return GROUP_ID.format(group.pk)


def affinity_group_key(group_id: str) -> int | None:
    """The key of the affinity group ``group_id`` names, or None when it names none."""
    match = GROUP_ID_PATTERN.fullmatch(group_id)
    return int(match[1], 16) if match is not None else None


def reservation_group_id(reservation: Reservation) -> str | None:
    """The server group an instance reservation stands for in OpenStack's APIs (Blazar makes
    one per reservation with an affinity, ``affinity`` or ``anti-affinity``): a UUID stable
    for the reservation, or None when its affinity is None (any host), as Blazar leaves it."""
    if reservation.resource_type != ResourceType.INSTANCE or reservation.affinity is None:
        return None
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"corral:reservation:{reservation.pk}"))

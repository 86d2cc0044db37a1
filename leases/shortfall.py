"""Why a reservation does not fit, in numbers: which resource runs short (vCPUs, memory, disk,
reservable hosts, or the hosts offering a property) and by how much. The planner
(``capacity.py``) adds it to its refusal, in words and as the API's ``short.limit``."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass

from django.template.defaultfilters import pluralize

from hosts.models import HostStatus
from leases.properties import matches, terms
from leases.rooms import HostRoom
from leases.sizes import RESOURCES, instance_count, quantity, size_of, slots_in

# What a limit's numbers count: one instance against the largest host; the instances asked
# against one host's free capacity (affinity); or against all the usable hosts' together.
INSTANCE, ONE_HOST, ALL_HOSTS = "instance", "one_host", "all_hosts"
NAMES = {"vcpus": "vCPUs", "memory_mb": "memory", "disk_gb": "disk"}


@dataclass(frozen=True)
class Limit:
    """What runs short: ``needed`` of ``resource`` (vcpus, memory_mb, disk_gb, or hosts: those
    offering ``property`` when one is named) where only ``available`` are, counted over
    ``scope``; ``text`` says it in words."""

    text: str
    resource: str
    needed: int
    available: int
    scope: str = ALL_HOSTS
    property: str | None = None

    def as_dict(self) -> dict:
        values = asdict(self)
        del values["text"]
        return values


def _is(count: int) -> str:
    return "is" if count == 1 else "are"


def _hosts(count: int) -> str:
    return f"{count} reservable host{pluralize(count)}" if count else "no reservable host"


def _those(properties: dict) -> str:
    return " with those properties" if properties else ""


def _term(name: str, constraint) -> str:
    """A property as asked, in words: "gpu == a100", "zone in (a, b)", "cpus >= 16"."""
    return " and ".join(
        f"{name} in ({', '.join(map(str, operand))})"
        if operator == "in"
        else f"{name} {operator} {operand}"
        for operator, operand in terms(name, constraint)
    )


def hosts_short(
    rooms: dict[int, HostRoom], properties: dict, needed: int, start=None, end=None
) -> Limit | None:
    """Why fewer than ``needed`` hosts can take the reservation: too few reservable hosts
    offer a property asked for (the one fewest offer), are up, or (given a window) are free of
    other reservations and VMs through it. None when that many can."""
    reservable = list(rooms.values())
    offering = [room for room in reservable if matches(room.host, properties)]
    if len(offering) < needed:
        return _property_short(reservable, properties, needed, len(offering))
    up = [room for room in offering if room.host.status == HostStatus.UP]
    those = _those(properties)
    if len(up) < needed:
        if len(offering) == 1:
            text = f"the only reservable host{those} is not up"
        else:
            which = f"only {len(up)}" if up else "none"
            text = f"{which} of the {len(offering)} reservable hosts{those} {_is(len(up))} up"
        return Limit(text, "hosts", needed, len(up))
    if start is None:
        return None
    free = sum(room.entirely_free(start, end) for room in up)
    if free >= needed:
        return None
    busy = len(up) - free
    if len(up) == 1:
        holding = "it holds"
    elif busy == len(up):
        holding = "all of them hold"
    else:
        holding = f"{busy} of them hold{'s' if busy == 1 else ''}"
    text = f"{_hosts(len(up))}{those} {_is(len(up))} up; {holding} other reservations or VMs then"
    return Limit(text, "hosts", needed, free)


def _property_short(reservable, properties: dict, needed: int, offering: int) -> Limit:
    counts = {
        name: sum(matches(room.host, {name: constraint}) for room in reservable)
        for name, constraint in properties.items()
    }
    fewest = min(counts, key=counts.get, default=None)
    if fewest is not None and counts[fewest] < needed:
        count = counts[fewest]
        offer = "offers" if count <= 1 else "offer"
        term = _term(fewest, properties[fewest])
        text = f"{'only ' if count else ''}{_hosts(count)} {offer} {term}"
        return Limit(text, "hosts", needed, count, property=fewest)
    if properties:
        offer = "offers" if offering <= 1 else "offer"
        text = f"{'only ' if offering else ''}{_hosts(offering)} {offer} all of those properties"
    elif offering:
        text = f"only {offering} host{pluralize(offering)} {_is(offering)} reservable"
    else:
        text = "no host is reservable"
    return Limit(text, "hosts", needed, offering)


def instances_short(
    rooms: dict[int, HostRoom],
    start,
    end,
    request: dict,
    *,
    on: int | None = None,
    running: bool = False,
) -> Limit | None:
    """Why the instances asked do not fit: no usable host, an instance larger than any, or the
    resource that runs short in the window, over all usable hosts, on distinct hosts (affinity
    false), or on host ``on`` (affinity true: the freest host, or the one ``running`` its VMs).
    None when no single resource explains it (each host lacks another)."""
    properties = request.get("host_properties") or {}
    usable = [
        room
        for room in rooms.values()
        if room.host.status == HostStatus.UP and matches(room.host, properties)
    ]
    if not usable:
        return hosts_short(rooms, properties, 1)
    size = size_of(request)
    amount = request["amount"]
    too_large = _too_large(usable, size, properties)
    if too_large is not None:
        return too_large
    if on is not None:
        host = "that host; it has" if running else "one host; the freest has"
        return _resource_short([rooms[on]], start, end, size, amount, ONE_HOST, host)
    if request.get("affinity") is False:
        return _distinct_short(usable, start, end, size, amount, properties)
    return _resource_short(usable, start, end, size, amount, ALL_HOSTS)


def _too_large(usable: list[HostRoom], size: dict, properties: dict) -> Limit | None:
    for resource in RESOURCES:
        reported = [room.capacity()[resource] for room in usable]
        if not size[resource] or None in reported:
            continue
        largest = max(reported)
        if size[resource] > largest:
            text = (
                f"each instance asks {quantity(resource, size[resource])}; the largest "
                f"reservable host{_those(properties)} has {largest}"
            )
            return Limit(text, resource, size[resource], largest, INSTANCE)
    return None


def _resource_short(
    hosts, start, end, size: dict, amount: int, scope: str, host: str = ""
) -> Limit | None:
    """The resource of which the hosts' free capacity holds the fewest of the instances."""
    free = [room.free(start, end) for room in hosts]
    short = None
    for resource in RESOURCES:
        if not size[resource] or any(f[resource] is None for f in free):
            continue
        fitting = sum(f[resource] // size[resource] for f in free)
        if fitting < amount and (short is None or fitting < short[1]):
            short = (resource, fitting, sum(f[resource] for f in free))
    if short is None:
        return None
    resource, fitting, available = short
    needed = amount * size[resource]
    text = (
        f"{amount} instance{pluralize(amount)} of {quantity(resource, size[resource])} "
        f"need{'s' if amount == 1 else ''} {quantity(resource, needed)} free"
    )
    if scope == ONE_HOST:
        text += f" on {host} {available}"
    else:
        text += f"; {available} {_is(available)} free"
        if available >= needed:
            text += f", but spread over hosts so that only {fitting} fit"
    return Limit(text, resource, needed, available, scope)


def _distinct_short(usable, start, end, size: dict, amount: int, properties: dict) -> Limit:
    if len(usable) < amount:
        text = (
            f"{instance_count(amount)} on distinct hosts need{pluralize(amount, 's,')} "
            f"{amount} reservable host{pluralize(amount)}{_those(properties)} that are up; "
            f"{len(usable)} {_is(len(usable))}"
        )
        return Limit(text, "hosts", amount, len(usable))
    lacking = Counter()
    for free in (room.free(start, end) for room in usable):
        if slots_in(free, size) < 1:
            lacking[
                next(
                    resource
                    for resource in RESOURCES
                    if size[resource]
                    and free[resource] is not None
                    and free[resource] < size[resource]
                )
            ] += 1
    roomy = len(usable) - sum(lacking.values())
    resource = lacking.most_common(1)[0][0]
    text = (
        f"{instance_count(amount)} on distinct hosts need{pluralize(amount, 's,')} {amount} "
        f"host{pluralize(amount)} with room for one each; "
        f"{roomy} {'has' if roomy == 1 else 'have'} it, the others lack free {NAMES[resource]}"
    )
    return Limit(text, "hosts", amount, roomy)

"""The demo ``make run`` seeds: each app adds its part, registered from its ``ready()``.

A seeder is ``seed(demo)``: ``demo`` is a dict shared along the way, holding the options
(``cluster``: the cluster's name, ``vms``: how many plain VMs) and what earlier seeders made
(hosts' seeder puts the cluster and the template there for the pools' one); it returns a
sentence saying what it made. Seeders run in rank order, in one transaction, and are
idempotent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction


@dataclass(frozen=True)
class Seeder:
    name: str
    seed: Callable[[dict], str]
    rank: int


_seeders: dict[str, Seeder] = {}


def register(name: str, seed: Callable[[dict], str], *, rank: int) -> None:
    _seeders[name] = Seeder(name, seed, rank)


@transaction.atomic
def seed(**options) -> list[str]:
    """Run every seeder; what each one made, in words."""
    demo = dict(options)
    return [s.seed(demo) for s in sorted(_seeders.values(), key=lambda s: s.rank)]

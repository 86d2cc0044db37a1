"""Capacity held for particular VMs elsewhere (a lease's reservation), as the scheduler sees it.

An app that holds host capacity for some VMs registers a provider (``register`` from its
``AppConfig.ready()``): given a VM, it answers the hosts where capacity is held for it (an
empty set: nowhere, now), or None when it holds nothing for that VM. The scheduler's
Reservation filter keeps such VMs on those hosts and every other VM off reservable hosts.
"""

from __future__ import annotations

from collections.abc import Callable

from hosts.models import VirtualMachine

ReservedHosts = Callable[[VirtualMachine], "set[int] | None"]
_providers: list[ReservedHosts] = []


def register(provider: ReservedHosts) -> None:
    if provider not in _providers:
        _providers.append(provider)


def reserved_hosts(vm: VirtualMachine) -> set[int] | None:
    """The hosts capacity is held on for ``vm``, or None when no provider holds any for it."""
    for provider in _providers:
        hosts = provider(vm)
        if hosts is not None:
            return hosts
    return None

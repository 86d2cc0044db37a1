"""Portal: the pools a user may take a VM from, and taking one."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from hosts.after_stop import AfterStop
from hosts.models import VirtualMachine
from pools import services
from pools.models import PoolType, VmPool
from project.access.permissions import restrict
from project.db import count_of
from project.errors import Refused


def _takeable(user):
    return restrict(VmPool.objects.all(), user, "pools.allocate_vmpool")


def _cards(user) -> list[VmPool]:
    """The pools the user may take from, each with its counts and ``why_not``: why taking a VM
    would be refused now ("" when it would not)."""
    pools = list(
        _takeable(user)
        .with_counts()
        .with_takeable()
        .annotate(mine=count_of(VirtualMachine.objects.filter(owner=user), "pool"))
        .select_related("template", "cluster")
        .order_by("name")
    )
    for pool in pools:
        # In the order allocate_vm refuses: the user's limit first, then an empty pool.
        if pool.mine >= pool.max_user_vms:
            pool.why_not = "limit"
        elif not pool.takeable_vms:
            pool.why_not = "empty"
        else:
            pool.why_not = ""
    return pools


@require_GET
@login_required
def take_page(request):
    """Take a VM: each pool the user may allocate from, with how many VMs are ready now."""
    context = {"pools": _cards(request.user), "section": "take"}
    return render(request, "portal/take.html", context)


@require_GET
@login_required
def pool_cards(request):
    """The pool cards alone, for live refreshes of the counts."""
    return render(request, "portal/_pool_cards.html", {"pools": _cards(request.user)})


@require_POST
@login_required
def take_vm(request, pool_id: int):
    """Hand the user a VM of the pool; show it (and its start job's progress if it boots)."""
    pool = get_object_or_404(_takeable(request.user), pk=pool_id)
    try:
        allocation = services.allocate_vm(pool, request.user)
    except Refused as refused:
        messages.error(request, refused.message)
        return redirect("portal:home")
    vm = allocation.vm
    if allocation.instant:
        messages.success(request, f"VM {vm.name} is yours and already running.")
    else:
        # That it is starting is shown live on its page, for as long as it is (#vm-starting).
        messages.info(request, f"VM {vm.name} is yours.")
    return redirect("portal:vm", vm_id=vm.pk)


# -- on the VM pages (hosts' portal views) ----------------------------------------------------

RETURN = "pools.return_vmpool"
VIEW_VM = "hosts.view_virtualmachine"


def decorate_vms(user, vms: list[VirtualMachine]) -> None:
    """Whether the user may give each VM back to its pool (one query for any number)."""
    ids = [vm.pk for vm in vms if vm.pool_id is not None]
    returnable = set(
        restrict(VirtualMachine.objects.filter(pk__in=ids), user, RETURN).values_list(
            "pk", flat=True
        )
    )
    for vm in vms:
        vm.can_return = vm.pool_id is not None and (vm.owner_id == user.pk or vm.pk in returnable)


def after_stop(vm: VirtualMachine) -> AfterStop | None:
    """What follows a stop of a VM of an automatic pool (``services.on_vm_stopped``): a held
    VM goes back to its pool, and a stateless pool reverts it to its base."""
    if vm.pool_id is None or vm.pool.type != PoolType.AUTOMATIC:
        return None
    pool = vm.pool
    if vm.owner_id is not None and pool.stateless:
        return AfterStop(
            "returned_and_reverted",
            f"Once it is stopped, VM {vm.name} goes back to pool {pool.name} and its disk is "
            "reverted to the pool's base: everything written to it since it was taken is lost.",
        )
    if vm.owner_id is not None:
        return AfterStop(
            "returned_to_pool",
            f"Once it is stopped, VM {vm.name} goes back to pool {pool.name} as it is, for "
            "others to take: whoever holds it now can no longer use it.",
        )
    if pool.stateless:
        return AfterStop(
            "reverted",
            f"Once it is stopped, VM {vm.name} is reverted to pool {pool.name}'s base: "
            "everything written to its disk is lost.",
        )
    return None


@require_POST
@login_required
def vm_return(request, vm_id: int):
    """Give a pool VM back; a stateless pool reverts it for the next user."""
    vm = get_object_or_404(restrict(VirtualMachine.objects.all(), request.user, VIEW_VM), pk=vm_id)
    may_return = vm.pool_id is not None and (
        vm.owner_id == request.user.pk
        or restrict(VirtualMachine.objects.filter(pk=vm.pk), request.user, RETURN).exists()
    )
    if not may_return:
        messages.error(request, f"Only the user of {vm.name} or its pool's admin may return it.")
        return redirect("portal:vm", vm_id=vm.pk)
    try:
        services.return_vm(vm, requested_by=request.user)
    except Refused as refused:
        messages.error(request, refused.message)
        return redirect("portal:vm", vm_id=vm.pk)
    messages.success(request, f"VM {vm.name} went back to pool {vm.pool.name}.")
    return redirect("portal:vms")

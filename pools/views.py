"""Portal: the pools a user may take a VM from, and taking one."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from hosts.models import VirtualMachine
from pools import services
from pools.models import VmPool
from project.db import count_of
from project.errors import Refused
from project.permissions import restrict


def _takeable(user):
    return restrict(VmPool.objects.all(), user, "pools.allocate_vmpool")


@require_GET
@login_required
def take_page(request):
    """Take a VM: each pool the user may allocate from, with how many VMs are ready now."""
    pools = (
        _takeable(request.user)
        .with_counts()
        .annotate(mine=count_of(VirtualMachine.objects.filter(owner=request.user), "pool"))
        .select_related("template", "cluster")
        .order_by("name")
    )
    return render(request, "portal/take.html", {"pools": pools, "section": "take"})


@require_GET
@login_required
def pool_cards(request):
    """The pool cards alone, for live refreshes of the counts."""
    pools = (
        _takeable(request.user)
        .with_counts()
        .annotate(mine=count_of(VirtualMachine.objects.filter(owner=request.user), "pool"))
        .select_related("template", "cluster")
        .order_by("name")
    )
    return render(request, "portal/_pool_cards.html", {"pools": pools})


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
        messages.info(request, f"VM {vm.name} is yours; it is starting now.")
    return redirect("portal:vm", vm_id=vm.pk)

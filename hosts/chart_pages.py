"""Portal: a VM's last day on its page (``portal/_vm_day_charts.html``, ``hosts.charts``), for
whoever may see the VM, and the fragment the page reads again every minute."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.views.decorators.http import require_GET

from hosts import charts, views
from hosts.models import VirtualMachine
from project.access.permissions import restrict


def section(user, vm: VirtualMachine, page_forms: dict) -> dict:
    """What ``portal/_vm_day_charts.html`` reads: the VM's charts and where to read them
    again (the page shows only VMs its user may see)."""
    return {
        "vm_day_charts": charts.vm_last_day(vm),
        "vm_day_charts_url": reverse("portal:vm-day-charts", args=[vm.pk]),
    }


@login_required
@require_GET
def vm_day_charts(request, vm_id: int):
    """The VM's last-day charts alone; a 404 for a VM the user may not see."""
    visible = restrict(VirtualMachine.objects.all(), request.user, views.VIEW)
    vm = get_object_or_404(visible, pk=vm_id)
    return HttpResponse(charts.vm_last_day(vm))

"""Portal: a VM's last day, week or month on its page (``portal/_vm_day_charts.html``,
``hosts.charts``, ``hosts.spans``: ``?span=week``), for whoever may see the VM, and the
fragment the page reads again every minute or when another span is picked."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.views.decorators.http import require_GET

from hosts import charts, spans, views
from hosts.models import VirtualMachine
from project.access.permissions import restrict


def section(request, vm: VirtualMachine, page_forms: dict) -> dict:
    """What ``portal/_vm_day_charts.html`` reads: the VM's charts over the span the page asks
    for and where to read them again (the page shows only VMs its user may see)."""
    span = spans.on_page(request)
    url = reverse("portal:vm-day-charts", args=[vm.pk])
    return {"vm_day_charts": spans.box("vm", url, span, charts.vm_span(vm, span))}


@login_required
@require_GET
def vm_day_charts(request, vm_id: int):
    """The VM's charts alone; a 404 for a VM the user may not see, a 400 for a span unknown."""
    visible = restrict(VirtualMachine.objects.all(), request.user, views.VIEW)
    vm = get_object_or_404(visible, pk=vm_id)
    return spans.fragment(request, lambda span: charts.vm_span(vm, span))

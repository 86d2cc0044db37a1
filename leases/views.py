"""Portal: the user's leases."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from leases.models import Lease
from project.permissions import restrict


def _visible(user):
    return restrict(Lease.objects.all(), user, "leases.view_lease")


@require_GET
@login_required
def lease_list(request):
    leases = _visible(request.user).order_by("start_date")
    return render(request, "portal/leases.html", {"leases": leases, "section": "leases"})


@require_GET
@login_required
def lease_detail(request, lease_id: int):
    lease = get_object_or_404(_visible(request.user), pk=lease_id)
    return render(request, "portal/lease.html", {"lease": lease, "section": "leases"})

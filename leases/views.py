"""Portal: the user's leases — the list with a timeline, creating one with a live capacity
answer, and each lease's page (launch a VM into it, change its end, delete it)."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count, Prefetch
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from hosts import services as vm_services
from hosts.models import JobKind, VirtualMachine
from leases import services, timeline
from leases.forms import (
    LOCAL_MINUTE,
    EndForm,
    LaunchForm,
    LeaseForm,
    capacity_answer,
    launchable,
    suggested_vm_name,
)
from leases.launch import refusal_when_full
from leases.models import Allocation, Lease, LeaseStatus, Reservation
from project.access.permissions import holds, holds_at_system, restrict
from project.errors import Refused, add_to_form

VIEW = "leases.view_lease"
ADD = "leases.add_lease"
CHANGE = "leases.change_lease"
DELETE = "leases.delete_lease"
LAUNCH = "hosts.add_virtualmachine"
ENDED = {LeaseStatus.TERMINATED, LeaseStatus.ERROR}
NO_LEASE_ROLE = "Creating leases needs the LeaseUser role; ask an administrator for it."


def _visible(user):
    return restrict(Lease.objects.all(), user, VIEW)


def _mine(user):
    """The leases of "My leases": all a user may see, or only their own for those who see
    everything."""
    leases = _visible(user)
    if holds_at_system(user, VIEW):
        leases = leases.filter(owner=user)
    return leases


# -- the list -------------------------------------------------------------------------------


def _list_context(user) -> dict:
    leases = list(_mine(user).prefetch_related("reservations").order_by("start_date", "name", "pk"))
    return {"leases": leases, "timeline": timeline.build(leases)}


@require_GET
@login_required
def lease_list(request):
    """My leases: a table and a timeline of them."""
    context = _list_context(request.user)
    context.update(section="leases", may_create=holds(request.user, ADD))
    return render(request, "portal/leases.html", context)


@require_GET
@login_required
def lease_list_fragment(request):
    """The timeline and the table alone, for live refreshes."""
    return render(request, "portal/_lease_list.html", _list_context(request.user))


# -- creating -------------------------------------------------------------------------------


def _initial_window() -> dict:
    start = timezone.localtime().replace(minute=0, second=0, microsecond=0)
    start += timedelta(hours=1)
    return {"start": start, "end": start + timedelta(hours=8)}


def _prefilled(query) -> dict:
    """The form's fields given in the query string (the one-click "use the window that fits"
    link): shown as typed, and validated as any input when the form is sent."""
    return {name: query[name] for name in LeaseForm.base_fields if query.get(name)}


def _with_window(form: LeaseForm, window: dict) -> str:
    """The new-lease form filled as ``form`` was sent, over ``window`` instead (a start, not
    "Start now")."""
    fields = {name: form.data.get(name, "") for name in LeaseForm.base_fields}
    fields.pop("start_now")
    for name in ("start", "end"):
        fields[name] = f"{timezone.localtime(window[name]):{LOCAL_MINUTE}}"
    return f"{reverse('portal:lease-new')}?{urlencode(fields)}"


def _answer_for(form: LeaseForm):
    if not form.is_valid():
        return None
    data = form.cleaned_data
    return capacity_answer(data["start"], data["end"], form.reservation_request())


@require_http_methods(["GET", "POST"])
@login_required
def lease_create(request):
    """A new lease of instances; refused with the planner's reason when it does not fit."""
    may_create = holds(request.user, ADD)
    if request.method == "POST" and not may_create:
        messages.error(request, NO_LEASE_ROLE)
        return redirect("portal:leases")
    form, earliest, answer = None, None, None
    if request.method == "POST":
        form = LeaseForm(request.POST, user=request.user)
        if not form.is_valid():
            # Bad input elsewhere (a name left out) does not hide whether the lease would fit.
            answer = _answer_for(LeaseForm(request.POST, user=request.user, check_only=True))
        else:
            data = form.cleaned_data
            try:
                lease = services.create_lease(
                    owner=request.user,
                    name=data["name"],
                    start=data["start"],
                    end=data["end"],
                    reservations=[form.reservation_request()],
                    group=data.get("group"),
                )
            except Refused as refused:
                # A refusal for capacity says what is short and when it would fit: the live
                # answer below stays quiet until the form changes, so it is said once. Any
                # other (a quota) leaves the answer in place.
                if "earliest_fit" not in refused.details:
                    answer = _answer_for(form)
                form.add_error(None, refused.message)
                window = refused.details.get("earliest_fit")
                if window:
                    earliest = {**window, "url": _with_window(form, window)}
            else:
                messages.success(request, f"Lease {lease.name} accepted.")
                return redirect("portal:lease", lease_id=lease.pk)
    elif may_create:
        initial = {**_initial_window(), **_prefilled(request.GET)}
        form = LeaseForm(initial=initial, user=request.user)
    context = {
        "form": form,
        "answer": answer,
        "earliest": earliest,
        "may_create": may_create,
        "section": "leases",
    }
    return render(request, "portal/lease_form.html", context)


@require_http_methods(["GET", "POST"])
@login_required
def lease_check(request):
    """Would the lease in the form fit? How many of its instances do; nothing is reserved."""
    if not holds(request.user, ADD):
        return render(request, "portal/_lease_capacity.html", {"refused": NO_LEASE_ROLE})
    form = LeaseForm(
        request.POST if request.method == "POST" else request.GET,
        user=request.user,
        check_only=True,
    )
    return render(
        request, "portal/_lease_capacity.html", {"form": form, "answer": _answer_for(form)}
    )


# -- one lease ------------------------------------------------------------------------------


def _get_lease(user, lease_id: int) -> Lease:
    return get_object_or_404(_visible(user).select_related("owner"), pk=lease_id)


def _lease_context(user, lease_id: int) -> dict:
    vms = restrict(VirtualMachine.objects.all(), user, "hosts.view_virtualmachine")
    reservations = Reservation.objects.prefetch_related(
        # Where it holds capacity; what it misses is shown apart (reservation.missing).
        Prefetch(
            "allocations",
            queryset=Allocation.objects.filter(host__isnull=False).select_related("host"),
        ),
        Prefetch("vms", queryset=vms.select_related("host").order_by("name"), to_attr="shown_vms"),
    )
    lease = get_object_or_404(
        _visible(user)
        .select_related("owner")
        .prefetch_related(Prefetch("reservations", queryset=reservations), "events"),
        pk=lease_id,
    )
    return {"lease": lease}


def _launch_offer(lease: Lease) -> tuple[list[Reservation], str]:
    """The reservations the launch form offers (those with an instance left, or all of them
    when none has) and, when none has, why no VM may launch now."""
    reservations = list(launchable(lease).select_related("lease").annotate(launched=Count("vms")))
    refusals = [refusal_when_full(r, r.launched) for r in reservations]
    open_ = [r for r, refused in zip(reservations, refusals, strict=True) if refused is None]
    if open_ or not reservations:
        return open_, ""
    if len(reservations) == 1:
        return reservations, f"{refusals[0].message} Delete one of its VMs to launch another."
    return reservations, (
        "Every reservation of this lease has all its instances launched. Delete one of its VMs "
        "to launch another."
    )


def _page_context(request, lease_id: int, *, end_form=None, launch_form=None) -> dict:
    """The lease and the actions the user may take on it now: what its page shows, and what
    each live refresh of it shows again."""
    user = request.user
    context = _lease_context(user, lease_id)
    lease = context["lease"]
    may_change = holds(user, CHANGE, lease) and lease.status not in ENDED
    offered, launch_full = _launch_offer(lease)
    may_launch = bool(offered) and holds(user, LAUNCH, VirtualMachine(reservation=offered[0]))
    if may_change and end_form is None:
        end_form = EndForm(initial={"end": lease.end_date})
    if may_launch and launch_form is None:
        taken = VirtualMachine.objects.filter(reservation__lease=lease).count()
        launch_form = LaunchForm(
            lease=lease,
            request=request,
            offered=launchable(lease).filter(pk__in=[r.pk for r in offered]),
            initial={"name": suggested_vm_name(lease, taken), "reservation": offered[0]},
        )
    # The launch form is kept across live refreshes until what it offers changes.
    launch_key = "-".join(str(r.pk) for r in offered) + ("-full" if launch_full else "")
    context.update(
        section="leases",
        may_change=may_change,
        may_delete=holds(user, DELETE, lease),
        may_launch=may_launch,
        end_form=end_form,
        launch_form=launch_form,
        launch_full=launch_full,
        launch_key=launch_key,
    )
    return context


def _page(request, lease_id: int, *, end_form=None, launch_form=None):
    """The lease's page: its live panel, with the actions the user may take on it."""
    context = _page_context(request, lease_id, end_form=end_form, launch_form=launch_form)
    return render(request, "portal/lease.html", context)


@require_GET
@login_required
def lease_detail(request, lease_id: int):
    """One lease: status, events, reservations with their hosts and VMs, and actions."""
    return _page(request, lease_id)


@require_GET
@login_required
def lease_panel(request, lease_id: int):
    """The live part of a lease's page (status, events, reservations and the actions they
    allow), for refreshes: what a reload of the page would show."""
    return render(request, "portal/_lease_panel.html", _page_context(request, lease_id))


@require_POST
@login_required
def lease_end(request, lease_id: int):
    """Move the lease's end (extend or shorten it), re-planned atomically or refused."""
    lease = _get_lease(request.user, lease_id)
    if not holds(request.user, CHANGE, lease):
        messages.error(request, f"You may look at lease {lease.name} but not change it.")
        return redirect("portal:lease", lease_id=lease.pk)
    form = EndForm(request.POST)
    if form.is_valid():
        try:
            lease = services.update_lease(lease, {"end": form.cleaned_data["end"]})
        except Refused as refused:
            form.add_error("end", refused.message)
        else:
            end = timezone.localtime(lease.end_date)
            messages.success(request, f"Lease {lease.name} now ends at {end:%Y-%m-%d %H:%M}.")
            return redirect("portal:lease", lease_id=lease.pk)
    return _page(request, lease.pk, end_form=form)


@require_GET
@login_required
def lease_launch_templates(request, lease_id: int):
    """The launch form's template field for the reservation chosen (``?reservation=``): what
    choosing another reservation fetches, to offer the templates that fit it."""
    lease = _get_lease(request.user, lease_id)
    chosen = {"reservation": request.GET.get("reservation")}
    form = LaunchForm(lease=lease, request=request, initial=chosen)
    return render(request, "portal/_lease_field.html", {"field": form["template"]})


@require_POST
@login_required
def lease_launch(request, lease_id: int):
    """Launch a VM into one of the lease's active reservations and start it."""
    lease = _get_lease(request.user, lease_id)
    form = LaunchForm(request.POST, lease=lease, request=request)
    if not form.is_valid():
        return _page(request, lease.pk, launch_form=form)
    vm = form.unsaved_vm
    if not holds(request.user, LAUNCH, vm):
        messages.error(request, f"You may not launch VMs into lease {lease.name}.")
        return redirect("portal:lease", lease_id=lease.pk)
    try:
        vm = vm_services.create_vm(vm, created_by=request.user)
    except Refused as refused:  # past the user's quota: nothing was made
        add_to_form(form, refused)
        return _page(request, lease.pk, launch_form=form)
    try:
        vm_services.request_operation(vm, JobKind.START, requested_by=request.user)
    except Refused as refused:
        messages.error(request, f"VM {vm.name} was created but not started: {refused.message}")
    else:
        # That it is starting is shown live on its page, for as long as it is (#vm-starting).
        messages.info(request, f"VM {vm.name} launched into lease {lease.name}.")
    return redirect("portal:vm", vm_id=vm.pk)


@require_http_methods(["GET", "POST"])
@login_required
def lease_delete(request, lease_id: int):
    """Delete a lease after a confirmation; an active one ends first (its VMs stop)."""
    lease = _get_lease(request.user, lease_id)
    if not holds(request.user, DELETE, lease):
        messages.error(request, f"You may look at lease {lease.name} but not delete it.")
        return redirect("portal:lease", lease_id=lease.pk)
    if request.method == "GET":
        vms = VirtualMachine.objects.filter(reservation__lease=lease).count()
        context = {"lease": lease, "vms": vms, "section": "leases"}
        return render(request, "portal/lease_confirm_delete.html", context)
    services.delete_lease(lease)
    messages.success(request, f"Lease {lease.name} deleted.")
    return redirect("portal:leases")

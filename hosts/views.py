"""Portal: the user's VMs, their operations, images made of them and the progress of the jobs
that carry them out."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Prefetch, Q
from django.http import Http404, HttpResponseNotFound
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from hosts import quotas, services, vm_images
from hosts.after_stop import after_stop
from hosts.forms import VmImageForm, VmSettingsForm
from hosts.guests import consoles, ssh
from hosts.host_words import reads_host_words, reads_job_host_words
from hosts.models import Job, JobKind, VirtualMachine, VmStatus
from hosts.models.jobs import ACTIVE_JOB_STATES
from project.access.permissions import holds_at_system, restrict
from project.errors import Refused, add_to_form

VIEW = "hosts.view_virtualmachine"
OPERATE = "hosts.operate_virtualmachine"
CHANGE = "hosts.change_virtualmachine"
RECENT_JOBS = 8

# What the apps above add to the VM pages (registered from their ``AppConfig.ready()``):
# ``decorate(user, vms)`` setting more attributes on the listed VMs (in a fixed number of
# queries), which the templates read (pools set ``can_return``). What follows a stop (a pool's
# VM going back to its pool) they say through ``hosts.after_stop``.
decorators: list = []
# The parts of a VM's page kept in modules of their own, each with its template and views (its
# snapshots: ``hosts.snapshot_pages``), registered from ``AppConfig.ready()`` too:
# ``section(request, vm, forms)`` returns what its template reads (nothing for a user it is
# not for), ``forms`` being the forms in error of a refused POST that the page shows again.
sections: list = []


def extend_vm_pages(*, decorate=None, section=None) -> None:
    """Plug an app, or a part of the page, into the VM pages (see ``decorators``, ``sections``)."""
    if decorate is not None and decorate not in decorators:
        decorators.append(decorate)
    if section is not None and section not in sections:
        sections.append(section)


# The operations the portal offers, in order (what the VM's state allows of them:
# ``services.operations_allowed_now``); each button says its job kind's name.
PORTAL_OPERATIONS = [
    JobKind.START,
    JobKind.SHUTDOWN,
    JobKind.POWEROFF,
    JobKind.SUSPEND,
    JobKind.RESUME,
]
OPERATION_KINDS = {kind.value for kind in PORTAL_OPERATIONS}
STOPS = {JobKind.SHUTDOWN.value, JobKind.POWEROFF.value}
SCREEN_STATUSES = {VmStatus.UP, VmStatus.PAUSED}


def _visible(user):
    return restrict(VirtualMachine.objects.all(), user, VIEW)


def _mine(user):
    """The VMs of "My VMs": all a user may see, or only their own for those who see everything."""
    vms = _visible(user)
    if holds_at_system(user, VIEW):
        vms = vms.filter(owner=user)
    return vms


def _with_details(vms):
    active = Job.objects.filter(state__in=ACTIVE_JOB_STATES).order_by("id")
    return vms.select_related(
        "host", "pool", "cluster", "template", "reservation__lease"
    ).prefetch_related(Prefetch("jobs", queryset=active, to_attr="active_jobs"))


def _decorate(user, vms: list[VirtualMachine]) -> list[VirtualMachine]:
    """Attach what the user may do to each VM: a few queries for any number of VMs."""
    ids = [vm.pk for vm in vms]
    operable = set(
        restrict(VirtualMachine.objects.filter(pk__in=ids), user, OPERATE).values_list(
            "pk", flat=True
        )
    )
    changeable = set(
        restrict(VirtualMachine.objects.filter(pk__in=ids), user, CHANGE).values_list(
            "pk", flat=True
        )
    )
    for vm in vms:
        allowed = services.operations_allowed_now(vm.status, [j.kind for j in vm.active_jobs])
        vm.offered = [
            (kind.value, kind.label)
            for kind in PORTAL_OPERATIONS
            if vm.pk in operable and kind in allowed
        ]
        # Holding a pool's VM for the admins (or releasing it) is for those who may change it.
        vm.can_change = vm.pk in changeable
        vm.can_hold = vm.can_change and vm.pool_id is not None
        vm.can_console = vm.pk in operable
        # An image of its disk: for its holder and whoever may operate it (vm_images' rule).
        vm.can_image = vm.pk in operable or (vm.owner_id is not None and vm.owner_id == user.pk)
        vm.screen_shown = vm.status in SCREEN_STATUSES and bool(vm.graphics_port)
        # A host that gives guests no serial console: no Terminal button, and the page says why.
        vm.no_terminal = consoles.no_terminal(vm) if vm.status in SCREEN_STATUSES else ""
        vm.terminal_shown = (
            vm.status in SCREEN_STATUSES and vm.host_id is not None and not vm.no_terminal
        )
        vm.starting = any(job.kind == JobKind.START for job in vm.active_jobs)
        # Asked before a stop that loses more than the guest's unsaved work.
        vm.after_stop = after_stop(vm)
    for decorate in decorators:
        decorate(user, vms)
    return vms


@require_GET
@login_required
def vm_list(request):
    """My VMs, with their live status, host, pool, lease and running jobs.

    Below them, the user's quota: each resource's limit and use (``hosts.quotas.quota_of``).
    ``?gone=1`` (where an open VM page that went out of reach sends its user) adds a notice
    saying so.
    """
    context = {
        "section": "vms",
        "gone": request.GET.get("gone") == "1",
        "quota": quotas.quota_of(request.user),
    }
    return render(request, "portal/vms.html", {**context, **_list_context(request.user)})


@require_GET
@login_required
def vm_rows(request):
    """The rows of My VMs alone, for live refreshes."""
    return render(request, "portal/_vm_rows.html", _list_context(request.user))


def _list_context(user) -> dict:
    vms = list(_with_details(_mine(user)).order_by("name", "pk"))
    return {"vms": _decorate(user, vms)}


def _vm_context(user, vm_id: int) -> dict:
    vm = get_object_or_404(_with_details(_visible(user)), pk=vm_id)
    _decorate(user, [vm])
    jobs = list(_jobs_shown(user, vm).order_by("-id")[:RECENT_JOBS])
    # Only its holder reads "your keys": others see how to connect, not the holder's keys.
    keys = ssh.keys_state(vm, user.pk) if vm.owner_id == user.pk else None
    # What the hosts said behind a failed job: for those who may see the cluster's hosts.
    host_words = any(job.error_detail for job in jobs) and reads_host_words(user, vm.cluster)
    return {
        "vm": vm,
        "jobs": jobs,
        "ssh": ssh.details(vm),
        "guest_keys": keys,
        "host_words": host_words,
    }


def _jobs_shown(user, vm: VirtualMachine):
    """The VM's jobs its page lists: a pool's VM shows its holder the jobs since they took it
    and those still under way, not the earlier holders'; whoever may change it sees them all."""
    jobs = Job.objects.filter(vm=vm)
    if vm.owner_id == user.pk and vm.taken_at is not None and not vm.can_change:
        jobs = jobs.filter(Q(created_at__gte=vm.taken_at) | Q(state__in=ACTIVE_JOB_STATES))
    return jobs


def _vm_page(request, vm_id: int, *, settings_form=None, status: int = 200, **forms):
    """A VM's page: its live panel, its settings form for those who may change it, the form
    making an image of it for those who may, and its sections (``sections``), showing
    ``forms`` (theirs, in error) again."""
    context = _vm_context(request.user, vm_id)
    vm = context["vm"]
    if vm.can_change and settings_form is None:
        on = "on" if vm.highly_available else "off"
        settings_form = VmSettingsForm(initial={"highly_available": on})
    context.update(
        section="vms",
        settings_form=settings_form if vm.can_change else None,
        image_form=(forms.get("image_form") or VmImageForm()) if vm.can_image else None,
    )
    for part in sections:
        context.update(part(request, vm, forms))
    return render(request, "portal/vm.html", context, status=status)


def vm_page_refusing(request, vm_id: int, **forms):
    """A VM's page answering a section's POST that bad input or a refusal stopped (a 400):
    ``forms`` (``snapshot_form=form``) shown again with their messages."""
    return _vm_page(request, vm_id, status=400, **forms)


@require_GET
@login_required
def vm_detail(request, vm_id: int):
    """One VM: status, where it runs, what may be done with it and its recent jobs."""
    return _vm_page(request, vm_id)


@require_GET
@login_required
def vm_panel(request, vm_id: int):
    """The live part of a VM's page (status, actions, jobs), for refreshes.

    A VM that went out of the user's reach while its page was open (given back to its pool)
    is still a 404, but the page's refresh is sent on to My VMs instead of polling it forever.
    The notice travels in the URL, not as a message: this refresh often runs beside the request
    of the action that gave the VM back, and two requests writing messages at once keep only
    one of them (the action's own confirmation would be lost).
    """
    try:
        context = _vm_context(request.user, vm_id)
    except Http404:
        return vm_out_of_reach(request)
    return render(request, "portal/_vm_panel.html", context)


def vm_out_of_reach(request):
    """The 404 of a VM page's refresh once the VM went out of the user's reach: an htmx
    refresh is sent on to My VMs (``?gone=1``), where the page says why."""
    if request.headers.get("HX-Request") != "true":
        raise Http404
    response = HttpResponseNotFound()
    response["HX-Redirect"] = f"{reverse('portal:vms')}?gone=1"
    return response


@require_POST
@login_required
def vm_operation(request, vm_id: int, operation: str):
    """Queue a power operation on a VM the user may operate; show its job on the VM's page."""
    vm = get_object_or_404(_visible(request.user), pk=vm_id)
    if operation not in OPERATION_KINDS:
        raise Http404("No such operation.")
    if not restrict(VirtualMachine.objects.filter(pk=vm.pk), request.user, OPERATE).exists():
        messages.error(request, f"You may look at VM {vm.name} but not operate it.")
        return redirect("portal:vm", vm_id=vm.pk)
    try:
        job = services.request_operation(vm, operation, requested_by=request.user)
    except Refused as refused:
        messages.error(request, refused.message)
        return redirect("portal:vm", vm_id=vm.pk)
    messages.info(request, f"{job.get_kind_display()} of {vm.name} queued (job {job.pk}).")
    if operation in STOPS and after_stop(vm) is not None:
        # Once stopped it goes back to its pool, out of its user's sight (often before the
        # browser follows this redirect): follow the job from My VMs, not from its page.
        return redirect("portal:vms")
    return redirect("portal:vm", vm_id=vm.pk)


def _may_change(request, vm: VirtualMachine) -> bool:
    """Whether the user may change ``vm``; if not, a message on the page says so."""
    if restrict(VirtualMachine.objects.filter(pk=vm.pk), request.user, CHANGE).exists():
        return True
    messages.error(request, f"You may look at VM {vm.name} but not change it.")
    return False


@require_POST
@login_required
def vm_hold(request, vm_id: int):
    """Hold a pool's VM for the admins (``held=1``) or release it (``held=0``)."""
    vm = get_object_or_404(_visible(request.user), pk=vm_id)
    if not _may_change(request, vm):
        return redirect("portal:vm", vm_id=vm.pk)
    held = request.POST.get("held")
    if held not in ("0", "1"):
        messages.error(request, "Say whether to hold the VM or release it.")
        return redirect("portal:vm", vm_id=vm.pk)
    try:
        vm = services.set_admin_hold(vm, held == "1", requested_by=request.user)
    except Refused as refused:
        messages.error(request, refused.message)
        return redirect("portal:vm", vm_id=vm.pk)
    if vm.admin_hold:
        done = f"VM {vm.name} is held for the admins: its pool hands it out no more."
    else:
        done = f"VM {vm.name} was released: its pool may hand it out again."
    messages.success(request, done)
    return redirect("portal:vm", vm_id=vm.pk)


@require_POST
@login_required
def vm_settings(request, vm_id: int):
    """Change a VM's settings (whether it is highly available), for those who may change it."""
    vm = get_object_or_404(_visible(request.user), pk=vm_id)
    if not _may_change(request, vm):
        return redirect("portal:vm", vm_id=vm.pk)
    form = VmSettingsForm(request.POST)
    if not form.is_valid():
        return _vm_page(request, vm.pk, settings_form=form, status=400)
    on = form.cleaned_data["highly_available"]
    vm = services.set_highly_available(vm, on, requested_by=request.user)
    if on:
        done = (
            f"VM {vm.name} is highly available: it is restarted on another host if its host "
            "is confirmed down."
        )
    else:
        done = f"VM {vm.name} is no longer highly available."
    messages.success(request, done)
    return redirect("portal:vm", vm_id=vm.pk)


@require_POST
@login_required
def vm_image(request, vm_id: int):
    """Make an image of a VM's disk (its holder, or who may operate it): the job shows on the
    VM's page; a refusal shows on the form."""
    vm = get_object_or_404(_visible(request.user), pk=vm_id)
    if not vm_images.may_make_image(request.user, vm):
        raise Http404
    form = VmImageForm(request.POST)
    if form.is_valid():
        try:
            job, image = vm_images.request_image(vm, requested_by=request.user, **form.cleaned_data)
        except Refused as refused:
            add_to_form(form, refused)
        else:
            messages.info(
                request,
                f"Image {image.name} of VM {vm.name} is being made (job {job.pk}); it is in "
                "My images once the job is done.",
            )
            return redirect("portal:vm", vm_id=vm.pk)
    return vm_page_refusing(request, vm.pk, image_form=form)


@require_GET
@login_required
def job_progress(request, job_id: int):
    """One job's progress bar (its state, step, and the error in words if it failed)."""
    visible = restrict(Job.objects.all(), request.user, "hosts.view_job") | Job.objects.filter(
        requested_by=request.user
    )
    job = get_object_or_404(visible, pk=job_id)
    host_words = reads_job_host_words(request.user, job)
    return render(request, "portal/_job.html", {"job": job, "host_words": host_words})

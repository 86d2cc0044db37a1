"""Portal: a VM's snapshots on its page (``portal/_vm_snapshots.html``), for whoever may operate
the VM: the list (refreshed live), taking one, reverting to one and deleting one, each a job on
the VM's queue (``hosts.snapshots``) that the page's jobs follow. For anyone else there is no
section, and its pages are a 404."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from hosts import snapshots, views
from hosts.models import VirtualMachine, VmSnapshot
from project.access.permissions import restrict
from project.errors import Refused, add_to_form
from project.names import validate_object_name

# The form's fields are named snapshot-name..., apart from other forms of the VM's page.
PREFIX = "snapshot"


class SnapshotForm(forms.Form):
    """What a user gives to take a snapshot of a VM."""

    name = forms.CharField(
        max_length=64,
        validators=[validate_object_name],
        help_text="Letters, digits, '.', '_' and '-'; one name per snapshot of this VM.",
        error_messages={"required": "Give the snapshot a name."},
    )
    description = forms.CharField(
        max_length=2000,
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Optional: what the VM is like now, for you to find it again.",
    )
    memory = forms.BooleanField(
        required=False, label="Save its memory too (it resumes where it was)"
    )


def _operated(user):
    """The VMs ``user`` may see and operate: those whose snapshots they see."""
    visible = restrict(VirtualMachine.objects.all(), user, views.VIEW)
    return restrict(visible, user, views.OPERATE)


def _listed(vm: VirtualMachine) -> list[VmSnapshot]:
    return list(VmSnapshot.objects.filter(vm=vm))


def section(request, vm: VirtualMachine, page_forms: dict) -> dict:
    """What ``portal/_vm_snapshots.html`` reads: the VM's snapshots, the form to take one (the
    one in error after a refused POST) and whether the VM's memory can be saved now; nothing
    for a user who may not operate the VM."""
    if not _operated(request.user).filter(pk=vm.pk).exists():
        return {}
    form = page_forms.get("snapshot_form") or SnapshotForm(prefix=PREFIX)
    memory_now = vm.status in snapshots.WITH_MEMORY_FROM
    if not memory_now:
        # Shown but not offered; the VM's live status turns it on (vm_snapshots.js).
        form.fields["memory"].widget.attrs["disabled"] = True
    return {"snapshot_section": {"list": _listed(vm), "form": form, "memory_now": memory_now}}


@require_GET
@login_required
def vm_snapshot_list(request, vm_id: int):
    """The VM's snapshots alone, for live refreshes."""
    vm = get_object_or_404(_operated(request.user), pk=vm_id)
    return render(request, "portal/_vm_snapshot_list.html", {"vm": vm, "snapshots": _listed(vm)})


@require_POST
@login_required
def vm_snapshot_take(request, vm_id: int):
    """Queue taking a snapshot; bad input and refusals (its name taken, the quota, a VM that
    takes none or has no disk yet) are shown on the form, and nothing is taken."""
    vm = get_object_or_404(_operated(request.user), pk=vm_id)
    form = SnapshotForm(request.POST, prefix=PREFIX)
    if form.is_valid():
        try:
            snapshot, job = snapshots.take(vm, **form.cleaned_data, requested_by=request.user)
        except Refused as refused:
            add_to_form(form, refused)
        else:
            messages.info(
                request,
                f"Snapshot {snapshot.name} of VM {vm.name} is being taken (job {job.pk}).",
            )
            return redirect("portal:vm", vm_id=vm.pk)
    return views.vm_page_refusing(request, vm.pk, snapshot_form=form)


def _snapshot(user, vm_id: int, snapshot_id: int) -> VmSnapshot:
    vm = get_object_or_404(_operated(user), pk=vm_id)
    snapshot = get_object_or_404(VmSnapshot, pk=snapshot_id, vm=vm)
    snapshot.vm = vm
    return snapshot


def _queue(request, vm_id: int, snapshot_id: int, queue, said) -> object:
    """Queue ``queue(snapshot, requested_by=...)`` on one of the VM's snapshots, then back to
    the VM's page: ``said(snapshot, job)`` as a message, or the refusal's."""
    snapshot = _snapshot(request.user, vm_id, snapshot_id)
    try:
        job = queue(snapshot, requested_by=request.user)
    except Refused as refused:
        messages.error(request, refused.message)
    else:
        messages.info(request, said(snapshot, job))
    return redirect("portal:vm", vm_id=vm_id)


@require_POST
@login_required
def vm_snapshot_revert(request, vm_id: int, snapshot_id: int):
    """Queue bringing the VM back to one of its snapshots; a refusal is a message."""
    return _queue(
        request,
        vm_id,
        snapshot_id,
        snapshots.revert,
        lambda snapshot, job: (
            f"VM {snapshot.vm.name} goes back to snapshot {snapshot.name} (job {job.pk})."
        ),
    )


@require_POST
@login_required
def vm_snapshot_delete(request, vm_id: int, snapshot_id: int):
    """Queue deleting one of the VM's snapshots; a refusal is a message."""
    return _queue(
        request,
        vm_id,
        snapshot_id,
        snapshots.delete,
        lambda snapshot, job: (
            f"Snapshot {snapshot.name} of VM {snapshot.vm.name} is being deleted (job {job.pk})."
        ),
    )

"""Admin screens for the snapshots of VMs: each VM's on its page (a read-only table,
``snapshots_on_vm_page``), and every snapshot of the VMs the admin may operate in a list of
their own (read-only, filtered by kind and state, searched by VM and name). Reverting to one
and deleting one ask first, then go through the snapshot services (``hosts.snapshots``): a job
on the VM's queue, the same rules as in the portal and the API, a refusal shown as a message."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib import admin, messages
from django.contrib.admin.utils import display_for_value
from django.http import Http404, HttpResponseRedirect
from django.template.defaultfilters import filesizeformat
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from hosts import snapshots
from hosts.guests.consoles import OPERATE
from hosts.models import SnapshotStatus, VirtualMachine, VmSnapshot
from project.access.permissions import holds, restrict
from project.errors import Refused


def _revert_loses(snapshot: VmSnapshot) -> str:
    if snapshot.memory:
        return (
            "The VM goes back to how it was when the snapshot was taken, running where it was "
            "then: everything it did and wrote to its disk since is lost."
        )
    return (
        "The VM's disk goes back to how it was when the snapshot was taken: everything written "
        "to it since is lost, and the VM is left shut off."
    )


def _delete_loses(snapshot: VmSnapshot) -> str:
    return "It is deleted from the VM's disk: the VM can no longer be brought back to it."


@dataclass(frozen=True)
class Step:
    """Reverting to a snapshot or deleting one: what it asks, does and says."""

    action: str  # the list's action
    title: str
    button: str
    loses: Callable[[VmSnapshot], str]
    service: Callable
    done: str


REVERT = Step(
    "revert_to_snapshots",
    "Revert VMs to these snapshots",
    "Yes, revert",
    _revert_loses,
    snapshots.revert,
    "VM {vm} goes back to snapshot {snapshot} (job #{job}).",
)
DELETE = Step(
    "delete_snapshots",
    "Delete these snapshots",
    "Yes, delete",
    _delete_loses,
    snapshots.delete,
    "Snapshot {snapshot} of VM {vm} is being deleted (job #{job}).",
)
# A snapshot's own links: /admin/hosts/vmsnapshot/<id>/revert/ and .../delete/ (which stands in
# for the admin's own deletion: a snapshot goes through its service).
STEPS = {"revert": REVERT, "delete": DELETE}


def one_snapshot_url(what: str, snapshot: VmSnapshot) -> str:
    return reverse(f"admin:hosts_vmsnapshot_{what}_one", args=[snapshot.pk])


def snapshots_on_vm_page(request, object_id) -> dict:
    """What the VM's page lists of its snapshots (``vm_snapshots``), for those who may operate
    it; nothing for others."""
    vm = VirtualMachine.objects.filter(pk=object_id).first() if str(object_id).isdigit() else None
    if vm is None or not holds(request.user, OPERATE, vm):
        return {}
    listed = VmSnapshot.objects.filter(vm=vm).select_related("owner")
    return {"vm_snapshots": list(listed), "vm_snapshots_url": _list_of(vm)}


def _list_of(vm: VirtualMachine) -> str:
    return f"{reverse('admin:hosts_vmsnapshot_changelist')}?vm__id__exact={vm.pk}"


class KindFilter(admin.SimpleListFilter):
    title = "kind"
    parameter_name = "kind"

    def lookups(self, request, model_admin):
        return [("memory", "with memory"), ("disk", "disk only")]

    def queryset(self, request, queryset):
        if self.value() in ("memory", "disk"):
            return queryset.filter(memory=self.value() == "memory")
        return queryset


@admin.register(VmSnapshot)
class VmSnapshotAdmin(admin.ModelAdmin):
    """Every snapshot of the VMs the admin may operate; taken from the portal or the API,
    reverted to and deleted here as there."""

    list_display = [
        "name",
        "vm_link",
        "kind",
        "is_current",
        "size",
        "taken",
        "quota_of",
        "state",
        "snapshot_actions",
    ]
    list_filter = [KindFilter, "status"]
    search_fields = ["name", "vm__name", "description"]
    list_select_related = ["vm", "owner"]
    fields = [
        "vm_link",
        "name",
        "description",
        "kind",
        "is_current",
        "state",
        "size",
        "counted",
        "quota_of",
        "taken",
        "snapshot_actions",
    ]
    readonly_fields = fields
    actions = [REVERT.action, DELETE.action]

    @admin.display(description="kind", ordering="memory")
    def kind(self, obj):
        return "with memory" if obj.memory else "disk only"

    @admin.display(description="current", boolean=True, ordering="current")
    def is_current(self, obj):
        return obj.current

    @admin.display(description="size on the host", ordering="size_bytes")
    def size(self, obj):
        return "not known yet" if obj.size_bytes is None else filesizeformat(obj.size_bytes)

    @admin.display(description="taken", ordering="created_at")
    def taken(self, obj):
        return display_for_value(obj.created_at, "—")

    @admin.display(description="owner (whose quota)", ordering="owner__username")
    def quota_of(self, obj):
        return obj.owner.username if obj.owner_id else "—"

    @admin.display(description="state", ordering="status")
    def state(self, obj):
        return obj.get_status_display()

    @admin.display(description="what to do")
    def snapshot_actions(self, obj):
        if obj.status != SnapshotStatus.READY:
            return "—"
        return format_html_join(
            " ",
            '<a class="button" href="{}" aria-label="{} {}">{}</a>',
            (
                (one_snapshot_url(what, obj), label, obj.name, label)
                for what, label in (("revert", "Revert to"), ("delete", "Delete"))
            ),
        )

    @admin.display(description="VM", ordering="vm__name")
    def vm_link(self, obj):
        link = reverse("admin:hosts_virtualmachine_change", args=[obj.vm_id])
        return format_html('<a href="{}">{}</a>', link, obj.vm.name)

    @admin.display(description="disk counted against the quota")
    def counted(self, obj):
        return f"{obj.disk_gb} GB"

    def get_queryset(self, request):
        operated = restrict(VirtualMachine.objects.all(), request.user, OPERATE)
        return super().get_queryset(request).filter(vm__in=operated)

    def has_module_permission(self, request):
        return self.has_view_permission(request)

    def has_view_permission(self, request, obj=None):
        return holds(request.user, OPERATE, obj.vm if obj is not None else None)

    def has_operate_permission(self, request):
        return self.has_view_permission(request)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_urls(self):
        own = [
            path(
                f"<int:snapshot_id>/{what}/",
                self.admin_site.admin_view(self.one_snapshot_view),
                {"what": what},
                name=f"hosts_vmsnapshot_{what}_one",
            )
            for what in STEPS
        ]
        return own + super().get_urls()

    @admin.action(description="Revert their VMs to the selected snapshots", permissions=["operate"])
    def revert_to_snapshots(self, request, queryset):
        return self._ask_then_do(request, queryset, REVERT)

    @admin.action(description="Delete the selected snapshots", permissions=["operate"])
    def delete_snapshots(self, request, queryset):
        return self._ask_then_do(request, queryset, DELETE)

    def one_snapshot_view(self, request, snapshot_id: int, what: str):
        """One snapshot's "Revert to" or "Delete" link: what it does, then (posted) done, and
        back to the VM's page."""
        found = list(
            self.get_queryset(request).select_related("vm", "owner").filter(pk=snapshot_id)
        )
        if not found:
            raise Http404
        step = STEPS[what]
        if request.method != "POST":
            return self._confirmation(request, found, step, action=None)
        self._carry_out(request, found, step)
        vm_page = reverse("admin:hosts_virtualmachine_change", args=[found[0].vm_id])
        return HttpResponseRedirect(vm_page)

    def _ask_then_do(self, request, queryset, step: Step):
        chosen = list(queryset.select_related("vm", "owner").order_by("vm__name", "created_at"))
        if request.POST.get("post") != "yes":
            return self._confirmation(request, chosen, step, action=step.action)
        self._carry_out(request, chosen, step)
        return None

    def _confirmation(self, request, chosen: list[VmSnapshot], step: Step, action):
        context = {
            **self.admin_site.each_context(request),
            "title": step.title,
            "opts": self.model._meta,
            "step": step,
            "rows": [(snapshot, step.loses(snapshot)) for snapshot in chosen],
            "action": action,
            "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/hosts/vmsnapshot/confirm.html", context)

    def _carry_out(self, request, chosen: list[VmSnapshot], step: Step) -> None:
        """Each snapshot (of a VM the admin may operate: ``get_queryset``) through its service:
        one message per job queued or refusal."""
        reverted_vms = set()
        for snapshot in chosen:
            if step is REVERT and snapshot.vm_id in reverted_vms:
                self.message_user(
                    request,
                    f"VM {snapshot.vm.name} is reverted to one snapshot only: "
                    f"{snapshot.name} was left out.",
                    messages.ERROR,
                )
                continue
            try:
                job = step.service(snapshot, requested_by=request.user)
            except Refused as refused:
                self.message_user(request, refused.message, messages.ERROR)
                continue
            reverted_vms.add(snapshot.vm_id)
            done = step.done.format(vm=snapshot.vm.name, snapshot=snapshot.name, job=job.pk)
            self.message_user(request, done, messages.SUCCESS)

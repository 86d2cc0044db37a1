"""The admin console's quotas: limits per user, per group and the default, with each user's
use beside their row. Only a system-wide grant (SuperUser on the System) sets or sees them."""

from django.contrib import admin
from django.db.models import Count, IntegerField, OuterRef, Subquery, Sum, Value
from django.db.models.functions import Coalesce

from hosts import quotas
from hosts.models import Quota, VirtualMachine
from hosts.models.quotas import LEASE_RESOURCE_NAMES, RESOURCE_NAMES, UNLIMITED
from project.access.permissions import holds_at_system


def _owned(aggregate) -> Coalesce:
    """An aggregate over the VMs the row's user owns, as a correlated sub-select."""
    total = (
        VirtualMachine.objects.filter(owner=OuterRef("user"))
        .order_by()
        .values("owner")
        .annotate(n=aggregate)
        .values("n")
    )
    return Coalesce(Subquery(total, output_field=IntegerField()), Value(0))


def vm_use(vms: int, vcpus: int, memory_mb: int, disk_gb: int) -> str:
    return f"{vms} VMs, {vcpus} vCPUs, {memory_mb} MB, {disk_gb} GB"


def _limit_column(name: str):
    @admin.display(ordering=name, description=Quota._meta.get_field(name).verbose_name)
    def column(self, obj):
        value = getattr(obj, name)
        if value is None:
            return "not set"
        return "unlimited" if value == UNLIMITED else value

    column.__name__ = f"{name}_limit"
    return column


class QuotaAdmin(admin.ModelAdmin):
    """Limits on what users hold. A user's effective limit on a resource is the most generous
    of their own row, their groups' rows and the default row (neither user nor group; the
    ``CORRAL_QUOTA_*`` and ``LEASE_QUOTA_*`` settings where it sets none); an empty limit is
    not set, -1 is unlimited. A user's row shows what they hold now."""

    list_display = ["__str__", *(f"{name}_limit" for name in RESOURCE_NAMES), "use"]
    list_select_related = ["user", "group"]
    search_fields = ["user__username", "group__name"]
    autocomplete_fields = ["user", "group"]
    fieldsets = [
        (None, {"fields": ["user", "group"]}),
        ("What they hold at once", {"fields": list(RESOURCE_NAMES)}),
        (
            "What their leases reserve at once",
            {
                "fields": list(LEASE_RESOURCE_NAMES),
                "description": "Counted over a lease's window, whatever the user holds now; "
                "where the default row sets none, the LEASE_QUOTA_* settings apply (0 there: "
                "no limit).",
            },
        ),
    ]

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                used_vms=_owned(Count("pk")),
                used_vcpus=_owned(Sum("vcpus")),
                used_memory_mb=_owned(Sum("memory_mb")),
                used_disk_gb=_owned(Sum("disk_gb")),
            )
        )

    @admin.display(description="use")
    def use(self, obj):
        if obj.user_id is None:
            return "–"
        return vm_use(obj.used_vms, obj.used_vcpus, obj.used_memory_mb, obj.used_disk_gb)

    def has_module_permission(self, request):
        return self.has_view_permission(request)

    def has_view_permission(self, request, obj=None):
        return quotas.may_see_quotas(request.user)

    def has_change_permission(self, request, obj=None):
        return quotas.may_set_quotas(request.user)

    def has_add_permission(self, request):
        return holds_at_system(request.user, "hosts.add_quota")

    def has_delete_permission(self, request, obj=None):
        return holds_at_system(request.user, "hosts.delete_quota")


for _name in RESOURCE_NAMES:
    setattr(QuotaAdmin, f"{_name}_limit", _limit_column(_name))
admin.site.register(Quota, QuotaAdmin)

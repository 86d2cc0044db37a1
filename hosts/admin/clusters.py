"""Admin screens for the inventory: clusters (with their hosts inline), hosts (their load, the
VMs and external domains on them, maintenance), templates."""

from django.contrib import admin, messages
from django.db.models import Count, IntegerField, OuterRef, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.http import Http404
from django.urls import path, reverse
from django.utils.html import format_html

from hosts import charts, cluster_charts, image_access, services, spans, sshtrust
from hosts.admin import host_keys
from hosts.admin.day_charts import DayChartsAdmin
from hosts.admin.quotas import vm_use
from hosts.models import Cluster, ExternalDomain, Host, Image, Template, VirtualMachine
from hosts.usage import Load, load, with_usage
from project.access.permissions import holds, restrict
from project.admin.base import LabelledTabularInline, ScopedAdmin
from project.db import count_of
from project.errors import Refused
from project.sizes import in_binary_units, mib_in_binary_units

ONLY_VISIBLE = admin.RelatedOnlyFieldListFilter  # a filter never names what the user cannot see
HOST_PAGE_ROWS = 50  # VMs and external domains listed on a host's page
NOT_REPORTED = "not reported yet"


class HostInline(LabelledTabularInline):
    model = Host
    fields = ["name", "uri", "status", "reservable", "cpus", "memory_mb"]
    readonly_fields = ["status", "cpus", "memory_mb"]
    extra = 0
    show_change_link = True


def _held_in_cluster(aggregate) -> Coalesce:
    """An aggregate over the cluster's VMs that users hold (own or took from a pool): what
    their quotas count, in total per cluster."""
    total = (
        VirtualMachine.objects.filter(cluster=OuterRef("pk"), owner__isnull=False)
        .order_by()
        .values("cluster")
        .annotate(n=aggregate)
        .values("n")
    )
    return Coalesce(Subquery(total, output_field=IntegerField()), Value(0))


@admin.register(Cluster)
class ClusterAdmin(DayChartsAdmin, ScopedAdmin):
    list_display = ["name", "description", "policy", "host_count", "vm_count", "held_by_users"]
    search_fields = ["name", "description"]
    list_select_related = ["policy"]
    inlines = [HostInline]

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                host_count=count_of(Host.objects.all(), "cluster"),
                vm_count=count_of(VirtualMachine.objects.all(), "cluster"),
                **{
                    f"held_{name}": _held_in_cluster(aggregate)
                    for name, aggregate in (
                        ("vms", Count("pk")),
                        ("vcpus", Sum("vcpus")),
                        ("memory_mb", Sum("memory_mb")),
                        ("disk_gb", Sum("disk_gb")),
                    )
                },
            )
        )

    day_charts_key = "cluster"

    def draw_span(self, obj, span) -> str:
        return cluster_charts.clusters_span([obj.pk], "This cluster", span)

    def get_urls(self):
        own = [
            path(
                "day-charts/",
                self.admin_site.admin_view(self.all_day_charts_view),
                name="hosts_cluster_all_day_charts",
            ),
            *self.day_charts_urls(),
        ]
        return own + super().get_urls()

    def all_day_charts_view(self, request):
        """The charts of every cluster the admin may see, added up (the dashboard's), over
        the span the query asks for."""
        if not self.has_view_permission(request):
            raise Http404
        return spans.fragment(request, lambda span: cluster_charts.visible_span(request.user, span))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        cluster = self.get_object(request, object_id)
        extra_context = {
            **(extra_context or {}),
            **self.day_charts_context(request, cluster),
        }
        return super().change_view(request, object_id, form_url, extra_context)

    @admin.display(description="held by users (counted in quotas)")
    def held_by_users(self, obj):
        return vm_use(obj.held_vms, obj.held_vcpus, obj.held_memory_mb, obj.held_disk_gb)

    @admin.display(ordering="host_count", description="hosts")
    def host_count(self, obj):
        return obj.host_count

    @admin.display(ordering="vm_count", description="VMs")
    def vm_count(self, obj):
        return obj.vm_count


def load_bar(figures: Load, resource: str, reported: str = "") -> str:
    """A meter of what VMs were given against what the scheduler may give, with the numbers
    (the host's own size, which Nova and Blazar show, in ``reported``)."""
    if figures.capacity is None:
        return format_html(
            '<span class="corral-load" data-resource="{}">not reported yet</span>', resource
        )
    return format_html(
        '<div class="corral-load" data-resource="{}" data-used="{}" data-capacity="{}" '
        'data-size="{}"><div class="meter-line"><meter min="0" max="{}" value="{}" high="{}" '
        'optimum="0" title="{}%">{}%</meter> {} of {} {}</div>'
        '<div class="mini quiet">{}</div></div>',
        resource,
        figures.used,
        figures.capacity,
        figures.size,
        figures.capacity,
        min(figures.used, figures.capacity),
        int(figures.capacity * 0.8),
        figures.percent,
        figures.percent,
        figures.used,
        figures.capacity,
        figures.unit,
        reported,
    )


@admin.register(Host)
class HostAdmin(DayChartsAdmin, ScopedAdmin):
    list_display = [
        "name",
        "cluster",
        "status",
        "memory_load",
        "cpu_load",
        "running_vm_count",
        "reservable",
        "last_seen_at",
    ]
    list_filter = [("cluster", ONLY_VISIBLE), "status", "status_reason", "reservable"]
    search_fields = ["name", "uri", "description"]
    readonly_fields = [
        "status",
        "status_reason",
        "status_detail",
        "memory_load",
        "cpu_load",
        "cpu_count",
        "memory_size",
        "cpu_in_use",
        "memory_in_use",
        "last_seen_at",
        "non_responsive_since",
        "confirmed_down_at",
        "confirmed_down_by",
        "fence_tried_at",
        "created_at",
        "updated_at",
        "storage_capacity",
        "storage_free",
        "storage_problem",
        "storage_checked_at",
        "domain_type",
        "machine",
        "emulator",
        "corral_ssh_key",
        "trusted_host_key",
        "offered_host_key",
    ]
    list_select_related = ["cluster"]
    actions = [
        "put_in_maintenance",
        "activate",
        "confirm_down",
        host_keys.trust_offered_host_keys,
    ]

    def get_queryset(self, request):
        return with_usage(super().get_queryset(request))

    def get_fieldsets(self, request, obj=None):
        main = ["name", "cluster", "uri", "description", "reservable", "networks", "capabilities"]
        storage = ["storage_pool", "storage_path", "shared_storage", "migration_address"]
        loopback_ssh = (
            "Guests' SSH through the host (guests with only a user-mode NIC)",
            {"fields": [("guest_ssh_port_min", "guest_ssh_port_max")]},
        )
        if obj is None:
            return [
                (None, {"fields": main}),
                ("Storage and migration", {"fields": storage}),
                loopback_ssh,
            ]
        return [
            (None, {"fields": main}),
            (
                "Storage, migration and hypervisor",
                {
                    "fields": [
                        *storage,
                        "storage_problem",
                        "storage_checked_at",
                        "storage_capacity",
                        "storage_free",
                        "domain_type",
                        "machine",
                        "emulator",
                    ]
                },
            ),
            loopback_ssh,
            (
                "SSH",
                {"fields": ["corral_ssh_key", "trusted_host_key", "offered_host_key"]},
            ),
            (
                "Status",
                {
                    "fields": [
                        "status",
                        "status_reason",
                        "status_detail",
                        "last_seen_at",
                        "non_responsive_since",
                        "confirmed_down_at",
                        "confirmed_down_by",
                        "fence_tried_at",
                    ]
                },
            ),
            (
                "Capacity and load",
                {
                    "fields": [
                        "memory_load",
                        "cpu_load",
                        "cpu_count",
                        "memory_size",
                        "cpu_in_use",
                        "memory_in_use",
                    ]
                },
            ),
            ("Record", {"fields": ["created_at", "updated_at"], "classes": ["collapse"]}),
        ]

    @admin.display(description="memory (given to VMs)")
    def memory_load(self, obj):
        memory, _ = load(obj)
        notes = [f"{obj.memory_mb} MiB × {obj.cluster.memory_overcommit_percent}%"]
        if obj.memory_used_mb is not None:
            notes.append(f"{obj.memory_used_mb} MiB in use on the host")
        return load_bar(memory, "memory", "; ".join(notes))

    @admin.display(description="vCPUs (given to VMs)")
    def cpu_load(self, obj):
        _, vcpus = load(obj)
        notes = [f"{obj.cpus} CPUs × {obj.cluster.cpu_overcommit_ratio:g}"]
        if obj.cpu_usage_percent is not None:
            notes.append(f"host CPU {obj.cpu_usage_percent:.0f}%")
        return load_bar(vcpus, "vcpus", "; ".join(notes))

    # The host's own figures, as it last reported them, in the units people read them in.

    @admin.display(description="CPUs")
    def cpu_count(self, obj):
        return NOT_REPORTED if obj.cpus is None else obj.cpus

    @admin.display(description="memory")
    def memory_size(self, obj):
        return NOT_REPORTED if obj.memory_mb is None else mib_in_binary_units(obj.memory_mb)

    @admin.display(description="CPU in use")
    def cpu_in_use(self, obj):
        return NOT_REPORTED if obj.cpu_usage_percent is None else f"{obj.cpu_usage_percent:.0f} %"

    @admin.display(description="memory in use")
    def memory_in_use(self, obj):
        if obj.memory_used_mb is None:
            return NOT_REPORTED
        return mib_in_binary_units(obj.memory_used_mb)

    @admin.display(description="storage capacity")
    def storage_capacity(self, obj):
        if obj.storage_capacity_bytes is None:
            return NOT_REPORTED
        return in_binary_units(obj.storage_capacity_bytes)

    @admin.display(description="free storage")
    def storage_free(self, obj):
        if obj.storage_free_bytes is None:
            return NOT_REPORTED
        return in_binary_units(obj.storage_free_bytes)

    @admin.display(description="Corral's SSH public key")
    def corral_ssh_key(self, obj):
        if obj is None or sshtrust.managed(obj.uri) is None:
            return "Not used: this host is not reached over SSH with Corral's own key."
        mine = sshtrust.identity()
        return format_html(
            "<code class='long-key'>{}</code><br>Put it in the "
            "<code>~/.ssh/authorized_keys</code> of the account the URI names on the host.",
            mine.public_key,
        )

    @admin.display(description="trusted host key")
    def trusted_host_key(self, obj):
        if obj is None or not obj.ssh_host_key:
            return "None yet: Corral does not connect until you trust the key the host offers."
        return format_html("<code>{}</code>", sshtrust.fingerprint(obj.ssh_host_key))

    @admin.display(description="offered host key")
    def offered_host_key(self, obj):
        if obj is None or not obj.ssh_host_key_offered:
            return "-"
        offered = sshtrust.fingerprint(obj.ssh_host_key_offered)
        return format_html(
            "<code>{}</code> ({})<br>Compare it with the host's own "
            "(<code>ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub</code> on the host), then "
            "<input type='hidden' name='trust_fingerprint' value='{}'>"
            "<button type='submit' class='button' formaction='{}' formmethod='post'>"
            "Trust this host key</button>",
            offered,
            "it changed" if obj.ssh_host_key else "not trusted yet",
            offered,
            reverse("admin:hosts_host_trust_host_key", args=[obj.pk]),
        )

    def get_urls(self):
        own = [
            path(
                "<int:host_id>/trust-host-key/",
                self.admin_site.admin_view(self.trust_host_key_view),
                name="hosts_host_trust_host_key",
            ),
            *self.day_charts_urls(),
        ]
        return own + super().get_urls()

    day_charts_key = "host"

    def draw_span(self, obj, span) -> str:
        return charts.host_span(obj, span)

    def trust_host_key_view(self, request, host_id: int):
        return host_keys.trust_host_key_view(self, request, host_id)

    @admin.display(ordering="running_vms", description="VMs running")
    def running_vm_count(self, obj):
        return obj.running_vms

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = {
            **(extra_context or {}),
            **self._on_host(request, object_id),
            **self.day_charts_context(request, self.get_object(request, object_id)),
        }
        return super().change_view(request, object_id, form_url, extra_context)

    def _on_host(self, request, object_id) -> dict:
        """The VMs and external domains on the host that the user may see (a page of each)."""
        try:
            host_id = int(object_id)
        except (TypeError, ValueError):
            return {}
        vms = restrict(
            VirtualMachine.objects.filter(host_id=host_id),
            request.user,
            "hosts.view_virtualmachine",
        ).select_related("owner")
        domains = restrict(
            ExternalDomain.objects.filter(host_id=host_id),
            request.user,
            "hosts.view_externaldomain",
        )
        return {
            "host_vms": list(vms.order_by("name")[:HOST_PAGE_ROWS]),
            "host_vm_count": vms.count(),
            "host_vms_url": reverse("admin:hosts_virtualmachine_changelist")
            + f"?host__id__exact={host_id}",
            "host_domains": list(domains.order_by("name")[:HOST_PAGE_ROWS]),
            "host_domain_count": domains.count(),
            "host_domains_url": reverse("admin:hosts_externaldomain_changelist")
            + f"?host__id__exact={host_id}",
        }

    def _each_host(self, request, queryset, verb: str, service):
        for host in queryset:
            if not holds(request.user, "hosts.change_host", host):
                self.message_user(request, f"You may not {verb} host {host.name}.", messages.ERROR)
                continue
            try:
                outcome = service(host, requested_by=request.user)
            except Refused as exc:
                self.message_user(request, exc.message, messages.ERROR)
                continue
            yield host, outcome

    @admin.action(
        description="Put in maintenance (move its running VMs away)", permissions=["change"]
    )
    def put_in_maintenance(self, request, queryset):
        done = self._each_host(request, queryset, "put in maintenance", services.put_in_maintenance)
        for host, migrations in done:
            moving = f"; {len(migrations)} VM(s) migrating away" if migrations else ""
            self.message_user(
                request, f"Host {host.name} is in maintenance{moving}.", messages.SUCCESS
            )

    @admin.action(description="Activate (leave maintenance)", permissions=["change"])
    def activate(self, request, queryset):
        for host, _ in self._each_host(request, queryset, "activate", services.activate_host):
            self.message_user(
                request,
                f"Host {host.name} left maintenance; it is Up once it is read again.",
                messages.SUCCESS,
            )

    @admin.action(
        description="Confirm down (powered off or fenced: restart its highly available VMs "
        "elsewhere)",
        permissions=["change"],
    )
    def confirm_down(self, request, queryset):
        for host, job in self._each_host(request, queryset, "confirm down", services.confirm_down):
            self.message_user(
                request,
                f"Host {host.name} is confirmed down; job {job.pk} restarts its highly "
                "available VMs elsewhere.",
                messages.SUCCESS,
            )


@admin.register(Template)
class TemplateAdmin(ScopedAdmin):
    """The admins' templates, and users' own (``owner``; private) for the admins of their
    cluster (``hosts.template_access``): made here, a template is the admins'."""

    list_display = [
        "name",
        "cluster",
        "owner",
        "visibility",
        "vcpus",
        "memory_mb",
        "disk_gb",
        "os_type",
        "disk_image",
    ]
    list_filter = [("cluster", ONLY_VISIBLE), "os_type", "visibility"]
    search_fields = ["name", "description", "owner__username"]
    list_select_related = ["cluster", "owner", "disk_image"]
    readonly_fields = ["owner"]

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        field = super().formfield_for_foreignkey(db_field, request, **kwargs)
        if db_field.remote_field.model is Image:
            field.queryset = image_access.visible(request.user, Image.objects.all())
        return field

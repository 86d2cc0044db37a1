"""Admin console screens for scheduling policies, policy units and affinity groups."""

from django.contrib import admin, messages
from django.core.exceptions import ValidationError

from hosts.models import Cluster
from project.access.permissions import holds, holds_at_system
from project.admin.base import JSON_FORM_FIELDS, LabelledTabularInline, ScopedAdmin, extend_admin
from scheduling import services
from scheduling.balancer import balance_cluster
from scheduling.models import AffinityGroup, Policy, PolicyFilter, PolicyUnit, PolicyWeight


@admin.register(PolicyUnit)
class PolicyUnitAdmin(admin.ModelAdmin):
    list_display = ["name", "kind_list", "internal", "enabled", "failure_outcome", "failing_since"]
    list_filter = ["internal", "enabled", "is_filter", "is_weight", "is_balance"]
    search_fields = ["name", "description"]
    readonly_fields = [
        "name",
        "description",
        "implementation",
        "is_filter",
        "is_weight",
        "is_balance",
        "internal",
        "properties",
        "error",
        "failing_since",
        "failure",
        "failure_outcome",
    ]

    @admin.display(description="kinds")
    def kind_list(self, obj):
        return ", ".join(obj.kinds)

    @admin.display(ordering="on_failure", description="on failure")
    def failure_outcome(self, obj):
        """What a failure of the unit does to a decision, for each of its kinds: a filter
        keeps or drops every host as ``on_failure`` says; a weight or a balancer has no say."""
        said = {
            "filter": obj.get_on_failure_display(),
            "weight": "Its scores count for nothing (neutral)",
            "balance": "It moves nothing",
        }
        kinds = obj.kinds
        if len(kinds) == 1:
            return said[kinds[0]]
        names = {"filter": "filter", "weight": "weight", "balance": "balancer"}
        return "; ".join(
            f"as a {names[kind]}: {said[kind][:1].lower()}{said[kind][1:]}" for kind in kinds
        )

    def get_fields(self, request, obj=None):
        """A filter's page offers the choice of what its failure does; any other unit's says
        what it does, as there is no choice to make."""
        fields = [name for name in super().get_fields(request, obj) if name != "failure_outcome"]
        if obj is not None and not obj.is_filter and "on_failure" in fields:
            fields[fields.index("on_failure")] = "failure_outcome"
        return fields

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_staff

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        # Every policy of every cluster may use a unit: as in the API, only system-wide.
        return holds_at_system(request.user, "scheduling.change_policyunit")

    def has_delete_permission(self, request, obj=None):
        return (
            obj is not None
            and not obj.internal
            and holds_at_system(request.user, "scheduling.delete_policyunit")
        )


class PolicyFilterInline(LabelledTabularInline):
    model = PolicyFilter
    extra = 0


class PolicyWeightInline(LabelledTabularInline):
    model = PolicyWeight
    extra = 0


@admin.register(Policy)
class PolicyAdmin(admin.ModelAdmin):
    """Policies with their filters, weights and balancer; built-in ones are read-only."""

    list_display = ["name", "locked", "is_default", "balance", "description"]
    list_filter = ["locked", "is_default"]
    search_fields = ["name", "description"]
    inlines = [PolicyFilterInline, PolicyWeightInline]
    actions = ["clone_policies"]
    formfield_overrides = JSON_FORM_FIELDS

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_staff

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request)

    def has_add_permission(self, request):
        return holds(request.user, "scheduling.add_policy")

    def has_change_permission(self, request, obj=None):
        if obj is None:
            return holds(request.user, "scheduling.change_policy")
        return not obj.locked and services.may_change(request.user, obj)

    def has_delete_permission(self, request, obj=None):
        return self.has_change_permission(request, obj) and (obj is None or not obj.is_default)

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        policy = form.instance
        try:
            policy.properties = services.validate_properties(
                services.policy_units(policy), policy.properties or {}
            )
        except ValidationError as exc:
            self.message_user(
                request, f"Properties not saved: {' '.join(exc.messages)}", messages.ERROR
            )
            policy.properties = {}
        policy.save(update_fields=["properties"])

    @admin.action(description="Clone the selected policies")
    def clone_policies(self, request, queryset):
        if not holds(request.user, "scheduling.add_policy"):
            self.message_user(request, "You may not create policies.", messages.ERROR)
            return
        for policy in queryset:
            name = f"{policy.name}-copy"
            suffix = 2
            while Policy.objects.filter(name=name).exists():
                name, suffix = f"{policy.name}-copy{suffix}", suffix + 1
            services.clone(policy, name)
        self.message_user(request, f"Cloned {queryset.count()} policies.")


@admin.register(AffinityGroup)
class AffinityGroupAdmin(ScopedAdmin):
    list_display = ["name", "cluster", "vm_rule", "vm_enforcing", "host_rule", "host_enforcing"]
    list_filter = [("cluster", admin.RelatedOnlyFieldListFilter), "vm_rule", "host_rule"]
    search_fields = ["name", "description"]
    filter_horizontal = ["vms", "hosts"]


class BalanceDryRun:
    """The clusters' admin screen shows what each cluster's balancer would do now."""

    @admin.action(description="Show what the balancer would do now (dry run)")
    def balance_dry_run(self, request, queryset):
        for cluster in queryset:
            outcome = balance_cluster(cluster.pk, dry_run=True)
            if outcome["action"] == "migrate":
                text = (
                    f"{cluster.name}: would move {outcome['vm_name']} from {outcome['from']} "
                    f"to one of {', '.join(outcome['candidates'])} ({outcome['reason']})."
                )
            else:
                text = f"{cluster.name}: nothing to move ({outcome['reason']})."
            self.message_user(request, text)


extend_admin(Cluster, BalanceDryRun, actions=["balance_dry_run"])

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class SchedulingConfig(AppConfig):
    name = "scheduling"
    verbose_name = "Scheduling"
    api_urls = "scheduling.api.urls"

    def ready(self) -> None:
        # Imported here, not at the top: these modules use the models, which are loaded only
        # once every app is configured.
        from hosts import checks, placement
        from hosts.signals import host_reported
        from project import events
        from scheduling import balancer, roles, scheduler, services, tasks, unit_calls
        from scheduling.registry import sync

        roles.register()
        tasks.register()
        placement.set_provider(scheduler.place)
        placement.add_after_decision(unit_calls.record_pending)
        events.register_object_type("policyunit", "scheduling.view_policyunit")
        checks.add_cluster_rule(services.check_cluster_policy)
        host_reported.connect(balancer.on_host_reported, dispatch_uid="balancer-track-load")

        post_migrate.connect(sync, sender=self, dispatch_uid="corral-scheduling-sync")

from django.apps import AppConfig
from django.db.models.signals import post_delete, post_migrate, post_save


class SchedulingConfig(AppConfig):
    name = "scheduling"
    verbose_name = "Scheduling"
    api_urls = "scheduling.api.urls"

    def ready(self) -> None:
        # Imported here, not at the top: these modules use the models, which are loaded only
        # once every app is configured.
        from hosts import checks, host_choice
        from hosts.models import Cluster
        from hosts.signals import host_reported
        from project import error_codes, events
        from scheduling import balancer, roles, scheduler, services, tasks, unit_calls
        from scheduling.error_codes import SchedulingErrorCode
        from scheduling.models import Policy, PolicyFilter, PolicyUnit, PolicyWeight
        from scheduling.registry import sync

        error_codes.register("scheduling", SchedulingErrorCode)
        roles.register()
        tasks.register()
        host_choice.set_provider(scheduler.place)
        host_choice.add_after_decision(unit_calls.record_pending)
        events.register_object_type("policyunit", "scheduling.view_policyunit")
        checks.add_cluster_rule(services.check_cluster_policy)
        host_reported.connect(balancer.on_host_reported, dispatch_uid="balancer-track-load")
        for model in (Cluster, Policy, PolicyUnit, PolicyFilter, PolicyWeight):
            for signal in (post_save, post_delete):
                signal.connect(balancer.forget_thresholds, sender=model, weak=False)

        post_migrate.connect(sync, sender=self, dispatch_uid="corral-scheduling-sync")

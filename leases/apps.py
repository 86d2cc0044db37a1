from django.apps import AppConfig


class LeasesConfig(AppConfig):
    name = "leases"
    verbose_name = "Leases"
    api_urls = "leases.api.urls"
    portal_urls = "leases.urls"

    def ready(self) -> None:
        # Imported here, not at the top: these modules use the models, which are loaded only
        # once every app is configured.
        from django.db.models.signals import post_save, pre_delete, pre_save

        from hosts import checks, signals
        from hosts.models import Host
        from leases import demo, host_changes, launch, metrics, roles, tasks
        from leases.error_codes import LeaseErrorCode
        from project import error_codes, events
        from project import metrics as project_metrics
        from project.access import scopes
        from scheduling import constraints

        error_codes.register("leases", LeaseErrorCode)
        scopes.register("lease", "leases.Lease", rank=30)
        roles.register()
        events.register_object_type("lease", "leases.view_lease")
        project_metrics.register(metrics.collect)
        constraints.register(launch.reserved_hosts)
        checks.add_launch_rule(launch.check_launch)
        tasks.register()
        demo.register()
        checks.add_host_rule(host_changes.check_host)
        # A reservable host that fails, leaves service or the pool moves its leases' capacity
        # elsewhere; one that returns, or a VM that stops, may make degraded leases whole.
        for signal, receiver in (
            (signals.host_unreachable, host_changes.on_host_unreachable),
            (signals.host_withdrawn, host_changes.on_host_withdrawn),
            (signals.host_returned, host_changes.on_host_returned),
            (signals.vm_stopped, host_changes.on_vm_stopped),
        ):
            signal.connect(receiver, dispatch_uid=f"leases-{receiver.__name__}")
        for signal, receiver in (
            (pre_save, host_changes.before_host_saved),
            (post_save, host_changes.after_host_saved),
            (pre_delete, host_changes.before_host_deleted),
        ):
            signal.connect(receiver, sender=Host, dispatch_uid=f"leases-{receiver.__name__}")

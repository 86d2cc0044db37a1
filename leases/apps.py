from django.apps import AppConfig


class LeasesConfig(AppConfig):
    name = "leases"
    verbose_name = "Leases"
    api_urls = "leases.api.urls"
    portal_urls = "leases.urls"

    def ready(self) -> None:
        # Imported here, not at the top: these modules use the models, which are loaded only
        # once every app is configured.
        from hosts import checks
        from hosts.signals import host_unreachable
        from leases import demo, launch, lifecycle, metrics, placement, roles, tasks
        from project import events, scopes
        from project import metrics as project_metrics
        from scheduling import constraints

        scopes.register("lease", "leases.Lease", rank=30)
        roles.register()
        events.register_object_type("lease", "leases.view_lease")
        project_metrics.register(metrics.collect)
        constraints.register(placement.reserved_hosts)
        checks.add_launch_rule(launch.check_launch)
        tasks.register()
        demo.register()
        host_unreachable.connect(lifecycle.on_host_unreachable, dispatch_uid="leases-host-lost")
        from project.identity import catalog

        # Blazar's reservation API (leases/blazar/), listed in identity tokens' catalogs.
        catalog.register("reservation", "blazar", "/reservation/v1")

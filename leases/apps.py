from django.apps import AppConfig


class LeasesConfig(AppConfig):
    name = "leases"
    verbose_name = "Leases"

    def ready(self) -> None:
        from leases import metrics, roles
        from project import events, scopes
        from project import metrics as project_metrics

        scopes.register("lease", "leases.Lease", rank=30)
        roles.register()
        events.register_object_type("lease", "leases.view_lease")
        project_metrics.register(metrics.collect)

from django.apps import AppConfig


class LeasesConfig(AppConfig):
    name = "leases"
    verbose_name = "Leases"

    def ready(self) -> None:
        from project import scopes

        scopes.register("lease", "leases.Lease", rank=30)

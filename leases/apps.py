from django.apps import AppConfig


class LeasesConfig(AppConfig):
    name = "leases"
    verbose_name = "Leases"

    def ready(self) -> None:
        from project.identity import catalog

        # Blazar's reservation API (leases/blazar/), listed in identity tokens' catalogs.
        catalog.register("reservation", "blazar", "/reservation/v1")

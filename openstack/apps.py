from django.apps import AppConfig


class OpenstackConfig(AppConfig):
    name = "openstack"
    verbose_name = "OpenStack APIs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from openstack.identity import catalog

        # Listed in identity tokens' catalogs next to Keystone itself.
        catalog.register("reservation", "blazar", "/reservation/v1")
        catalog.register("compute", "nova", "/compute/v2.1")
        # Unversioned, as Glance is listed: clients discover v2 from /image.
        catalog.register("image", "glance", "/image")

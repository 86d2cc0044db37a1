from django.apps import AppConfig
from django.db.models.signals import post_migrate


class SchedulingConfig(AppConfig):
    name = "scheduling"
    verbose_name = "Scheduling"

    def ready(self) -> None:
        from scheduling import roles
        from scheduling.registry import sync

        roles.register()

        post_migrate.connect(sync, sender=self, dispatch_uid="corral-scheduling-sync")

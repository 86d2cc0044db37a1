from django.apps import AppConfig
from django.db.models.signals import post_delete, post_migrate


class ProjectConfig(AppConfig):
    name = "project"
    verbose_name = "Access"

    def ready(self) -> None:
        from project.grants import remove_grants_on
        from project.permissions import SCOPE_MODELS
        from project.roles import sync_builtin_roles

        post_migrate.connect(sync_builtin_roles, dispatch_uid="corral-sync-builtin-roles")
        for label in SCOPE_MODELS.values():
            post_delete.connect(
                remove_grants_on, sender=label, dispatch_uid=f"corral-remove-grants-{label}"
            )

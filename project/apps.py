from django.apps import AppConfig
from django.conf import settings
from django.contrib.admin import apps as admin_apps
from django.db.models.signals import post_delete, post_migrate, pre_save


class ProjectConfig(AppConfig):
    name = "project"
    verbose_name = "Access"

    def ready(self) -> None:
        from project.accounts import refuse_username_in_use
        from project.grants import remove_grants_on
        from project.permissions import SCOPE_MODELS
        from project.roles import sync_builtin_roles

        post_migrate.connect(sync_builtin_roles, dispatch_uid="corral-sync-builtin-roles")
        pre_save.connect(
            refuse_username_in_use,
            sender=settings.AUTH_USER_MODEL,
            dispatch_uid="corral-username-unique-ignoring-case",
        )
        for label in SCOPE_MODELS.values():
            post_delete.connect(
                remove_grants_on, sender=label, dispatch_uid=f"corral-remove-grants-{label}"
            )


class CorralAdminConfig(admin_apps.AdminConfig):
    """Django's admin, with Corral's site (the dashboard) as the default ``admin.site``."""

    default = False  # "project" itself keeps ProjectConfig
    default_site = "project.admin_site.CorralAdminSite"

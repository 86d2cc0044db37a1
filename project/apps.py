from django.apps import AppConfig
from django.conf import settings
from django.contrib.admin import apps as admin_apps
from django.db.models.signals import post_migrate, pre_save


class ProjectConfig(AppConfig):
    name = "project"
    verbose_name = "Access"

    def ready(self) -> None:
        # Imported here, not at the top: these modules use the models, which are loaded only
        # once every app is configured.
        from project import dashboard, scopes, tasks
        from project.accounts import refuse_username_in_use
        from project.roles import sync_builtin_roles

        post_migrate.connect(sync_builtin_roles, dispatch_uid="corral-sync-builtin-roles")
        pre_save.connect(
            refuse_username_in_use,
            sender=settings.AUTH_USER_MODEL,
            dispatch_uid="corral-username-unique-ignoring-case",
        )
        scopes.register("system", "project.System", rank=0)
        tasks.register()
        dashboard.register(
            "alerts",
            model_label="project.Event",
            template="admin/corral/dashboard/alerts.html",
            compute=dashboard.alerts,
            rank=40,
        )


class CorralAdminConfig(admin_apps.AdminConfig):
    """Django's admin, with Corral's site (the dashboard) as the default ``admin.site``."""

    default = False  # "project" itself keeps ProjectConfig
    default_site = "project.admin_site.CorralAdminSite"

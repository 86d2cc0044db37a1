from django.apps import AppConfig
from django.conf import settings
from django.contrib.admin import apps as admin_apps
from django.db.models.signals import post_delete, post_migrate, post_save, pre_save


class ProjectConfig(AppConfig):
    name = "project"
    verbose_name = "Access"

    def ready(self) -> None:
        # Imported here, not at the top: these modules use the models, which are loaded only
        # once every app is configured.
        from django.contrib.auth.signals import user_logged_out
        from django.contrib.sessions.models import Session
        from django_q.signals import post_spawn

        from project import dashboard, tasks, ticker
        from project.access import scopes
        from project.access.accounts import refuse_username_in_use
        from project.access.grants import remove_grants_on
        from project.access.roles import sync_builtin_roles
        from project.access.tokens import end_password_logins
        from project.live.asgi import forget_credentials
        from project.models import APIToken

        post_migrate.connect(sync_builtin_roles, dispatch_uid="corral-sync-builtin-roles")
        post_migrate.connect(ticker.ensure_schedules, sender=self, dispatch_uid="corral-schedules")
        post_spawn.connect(ticker.revive_ticker, dispatch_uid="corral-revive-ticker")
        pre_save.connect(
            refuse_username_in_use,
            sender=settings.AUTH_USER_MODEL,
            dispatch_uid="corral-username-unique-ignoring-case",
        )
        pre_save.connect(
            end_password_logins,
            sender=settings.AUTH_USER_MODEL,
            dispatch_uid="corral-password-ends-keystone-logins",
        )
        # A token revoked, a session ended or a user changed (deactivated) in this process
        # counts at once for the live requests answered directly (project/live/asgi.py).
        for name, signal, sender in (
            ("token", post_delete, APIToken),
            ("session", post_delete, Session),
            ("user", post_save, settings.AUTH_USER_MODEL),
            ("log-out", user_logged_out, None),
        ):
            signal.connect(forget_credentials, sender=sender, dispatch_uid=f"corral-live-{name}")
        # Guardian keeps object keys as text: the grants on a deleted scope object would
        # outlive it, still listed and impossible to revoke.
        scopes.on_delete("remove-grants", remove_grants_on)
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

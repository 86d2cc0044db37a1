from django.apps import AppConfig
from django.conf import settings
from django.db.models.signals import post_delete, post_save, pre_delete, pre_save

# How often finished jobs past their retention are pruned.
PRUNE_JOBS_EVERY_S = 600


class HostsConfig(AppConfig):
    name = "hosts"
    verbose_name = "Inventory"
    api_urls = "hosts.api.urls"
    portal_urls = "hosts.urls"

    def ready(self) -> None:
        # Imported here, not at the top: these modules use the models, which are loaded only
        # once every app is configured.
        from django_q.signals import post_spawn

        from hosts import (  # noqa: F401
            chart_pages,
            cluster_samples,
            dashboard,
            demo,
            driver,
            jobs,
            metrics,
            roles,
            samples,
            services,
            snapshot_pages,
            sshtrust,
            tasks,
            template_access,
            user_deletion,
            views,
            vm_images,
        )
        from hosts.error_codes import HostErrorCode
        from hosts.guests.console_relay import ConsoleRelay
        from hosts.guests.serial_relay import SerialRelay
        from hosts.jobs import retention
        from hosts.models import Host, Template
        from hosts.signals import guest_keys_stale, host_fenced, job_finished
        from hosts.sync import loop as sync_loop
        from hosts.sync import shared_storage
        from project import error_codes, events, loops, websockets
        from project import metrics as project_metrics
        from project.access import scopes
        from project.access.permissions import register_view_rule
        from project.admin import users as users_admin

        error_codes.register("hosts", HostErrorCode)
        driver.register_connection_uri(sshtrust.connection_uri)
        scopes.register("cluster", "hosts.Cluster", rank=10)
        scopes.register("vm", "hosts.VirtualMachine", rank=40)
        roles.register()
        for object_type, action in {
            "vm": "hosts.view_virtualmachine",
            "job": "hosts.view_job",
            "host": "hosts.view_host",
            "cluster": "hosts.view_cluster",
        }.items():
            events.register_object_type(object_type, action)
        project_metrics.register(metrics.collect)
        project_metrics.allow_scraping_with("hosts.view_host")
        dashboard.register()
        loops.register("reap", jobs.reap)
        jobs.run_jobs_with(tasks.run_job)
        websockets.register("ws/console/<str:ticket>/", ConsoleRelay)
        websockets.register("ws/serial/<str:ticket>/", SerialRelay)
        loops.register(
            "prune-jobs", retention.prune_finished, every=lambda: PRUNE_JOBS_EVERY_S, threaded=False
        )
        loops.register(
            "prune-host-samples", samples.prune, every=lambda: samples.PRUNE_EVERY_S, threaded=False
        )
        loops.register(
            "cluster-census",
            cluster_samples.census,
            every=lambda: cluster_samples.CENSUS_EVERY_S,
            threaded=False,
        )
        demo.register()
        register_view_rule(Template, lambda queryset, user: template_access.visible(user, queryset))
        views.extend_vm_pages(section=snapshot_pages.section)
        views.extend_vm_pages(section=chart_pages.section)
        users_admin.register_deletion_note(user_deletion.notes)
        pre_delete.connect(
            _release_user_things,
            sender=settings.AUTH_USER_MODEL,
            dispatch_uid="corral-user-images",
        )
        post_spawn.connect(sync_loop.start_in_worker, dispatch_uid="corral-syncer")
        host_fenced.connect(services.confirm_fenced, dispatch_uid="corral-confirm-fenced")
        job_finished.connect(vm_images.discard_unsaved, dispatch_uid="corral-unsaved-images")
        guest_keys_stale.connect(_keys_stale, dispatch_uid="corral-keys-stale")
        post_save.connect(_keys_changed, sender="project.SshKey", dispatch_uid="corral-key-added")
        post_delete.connect(
            _keys_changed, sender="project.SshKey", dispatch_uid="corral-key-deleted"
        )
        # A host whose storage settings change is checked again at its next sync.
        pre_save.connect(
            shared_storage.before_host_saved, sender=Host, dispatch_uid="corral-host-storage"
        )


def _keys_changed(sender, instance, **kwargs) -> None:
    """A user added or deleted an SSH key: the running VMs they hold get their keys now."""
    from django.db import transaction

    from hosts.guests import keys

    owner_id = instance.owner_id
    transaction.on_commit(lambda: keys.follow_owner_of(owner_id))


def _keys_stale(sender, vms, **kwargs) -> None:
    """Guests found holding other keys than they should: a job for each with none queued."""
    from hosts import jobs
    from hosts.models import JobKind

    jobs.submit_many(JobKind.GUEST_KEYS, vms)


def _release_user_things(sender, instance, **kwargs) -> None:
    """Before a user is deleted: their templates and images nothing uses go, those in use pass
    to the admins."""
    from hosts import user_deletion

    user_deletion.release(instance)

from django.apps import AppConfig


class PoolsConfig(AppConfig):
    name = "pools"
    verbose_name = "VM pools"
    api_urls = "pools.api.urls"
    portal_urls = "pools.urls"

    def ready(self) -> None:
        # Imported here, not at the top: these modules use the models, which are loaded only
        # once every app is configured.
        from hosts import after_stop, checks
        from hosts import views as vm_pages
        from hosts.signals import job_finished, vm_stopped
        from pools import dashboard, demo, metrics, monitor, roles, services, tasks, views
        from pools.error_codes import PoolErrorCode
        from project import error_codes, events
        from project import metrics as project_metrics
        from project.access import scopes

        # A pool grant reaches the pool's VMs only for roles that manage the pool: UserRole on
        # a pool lets a user take VMs from it, not see or use the VMs other users took.
        scopes.register("pool", "pools.VmPool", rank=20, contents_need="pools.change_vmpool")
        error_codes.register("pools", PoolErrorCode)
        roles.register()
        events.register_object_type("pool", "pools.view_vmpool")
        project_metrics.register(metrics.collect)
        dashboard.register()
        tasks.register()
        demo.register()
        vm_pages.extend_vm_pages(decorate=views.decorate_vms)
        after_stop.register(views.after_stop)

        checks.add_operation_rule(services.hold_when_started_by_another)
        checks.add_operation_rule(services.no_snapshots_in_stateless_pools)
        vm_stopped.connect(services.on_vm_stopped, dispatch_uid="pools-return-on-stop")
        job_finished.connect(monitor.on_job_finished, dispatch_uid="pools-prestart-failures")
        job_finished.connect(tasks.nudge_when_ready, dispatch_uid="pools-nudge-when-ready")

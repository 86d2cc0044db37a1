from django.apps import AppConfig


class PoolsConfig(AppConfig):
    name = "pools"
    verbose_name = "VM pools"

    def ready(self) -> None:
        from hosts.signals import job_finished, vm_stopped
        from pools import services

        vm_stopped.connect(services.on_vm_stopped, dispatch_uid="pools-return-on-stop")
        job_finished.connect(services.on_job_finished, dispatch_uid="pools-prestart-failures")

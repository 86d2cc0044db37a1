"""Seed a demo: a small template, a few VMs and a VM pool in the simulated hosts' cluster."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from hosts.models import Cluster, Template, VirtualMachine


class Command(BaseCommand):
    help = "Create a demo template, VMs and a VM pool (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", default="demo")
        parser.add_argument("--vms", type=int, default=4)

    @transaction.atomic
    def handle(self, *args, cluster: str, vms: int, **options):
        cluster_obj, _ = Cluster.objects.get_or_create(name=cluster)
        template, _ = Template.objects.get_or_create(
            name="tiny",
            defaults={
                "description": "1 vCPU, 128 MiB, 1 GB: small enough for simulated hosts",
                "vcpus": 1,
                "memory_mb": 128,
                "disk_gb": 1,
                "networks": ["default"],
            },
        )
        owner = get_user_model().objects.filter(is_superuser=True).order_by("pk").first()
        for index in range(1, vms + 1):
            VirtualMachine.objects.get_or_create(
                cluster=cluster_obj,
                name=f"demo-{index}",
                defaults={
                    "template": template,
                    "owner": owner,
                    "vcpus": template.vcpus,
                    "memory_mb": template.memory_mb,
                    "disk_gb": template.disk_gb,
                },
            )
        from pools.models import VmPool
        from pools.services import create_pool

        if not VmPool.objects.filter(name="demo-pool").exists():
            create_pool(
                VmPool(
                    name="demo-pool",
                    description="Four lab VMs, two kept running for instant use",
                    cluster=cluster_obj,
                    template=template,
                    size=4,
                    prestarted_vms=2,
                    name_pattern="lab-??",
                )
            )
        self.stdout.write(
            f"Demo: template {template.name}, {vms} VMs and the pool demo-pool (4 VMs, 2 kept "
            f"running) in cluster {cluster}."
        )

"""The inventory's part of the demo: the cluster, a small template and a few VMs."""

from django.contrib.auth import get_user_model

from hosts.models import Cluster, Template, VirtualMachine
from project import demo


def seed(options: dict) -> str:
    cluster, _ = Cluster.objects.get_or_create(name=options["cluster"])
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
    for index in range(1, options["vms"] + 1):
        VirtualMachine.objects.get_or_create(
            cluster=cluster,
            name=f"demo-{index}",
            defaults={
                "template": template,
                "owner": owner,
                "vcpus": template.vcpus,
                "memory_mb": template.memory_mb,
                "disk_gb": template.disk_gb,
            },
        )
    options["cluster_obj"], options["template"] = cluster, template
    return f"Demo: template {template.name} and {options['vms']} VMs in cluster {cluster.name}."


def register() -> None:
    demo.register("inventory", seed, rank=10)

"""The pools' part of the demo: a pool of four lab VMs, two kept running for instant use."""

from pools.models import VmPool
from pools.services import create_pool
from project import demo


def seed(options: dict) -> str:
    if not VmPool.objects.filter(name="demo-pool").exists():
        create_pool(
            VmPool(
                name="demo-pool",
                description="Four lab VMs, two kept running for instant use",
                cluster=options["cluster_obj"],
                template=options["template"],
                size=4,
                prestarted_vms=2,
                name_pattern="lab-??",
            )
        )
    return f"Demo: the pool demo-pool (4 VMs, 2 kept running) in cluster {options['cluster']}."


def register() -> None:
    demo.register("pool", seed, rank=20)

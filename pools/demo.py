"""The pools' part of the demo: a pool of four VMs, two kept running for instant use; with a lab
cluster, a pool of one tiny guest kept running on its real QEMU host. Each pool's VMs are named
after it (demo-pool-1, …; lab-pool-1), so that a VM's name says where it came from."""

from pools.models import VmPool
from pools.services import create_pool
from project import demo

LAB_POOL = "lab-pool"


def seed(options: dict) -> str:
    if not VmPool.objects.filter(name="demo-pool").exists():
        create_pool(
            VmPool(
                name="demo-pool",
                description="Four VMs, two kept running for instant use",
                cluster=options["cluster_obj"],
                template=options["template"],
                size=4,
                prestarted_vms=2,
            )
        )
    made = f"Demo: the pool demo-pool (4 VMs, 2 kept running) in cluster {options['cluster']}."
    if options.get("lab_template") is None:
        return made
    if not VmPool.objects.filter(name=LAB_POOL).exists():
        create_pool(
            VmPool(
                name=LAB_POOL,
                description="The tiny guest on a real QEMU host, one kept running: take it",
                cluster=options["lab_obj"],
                template=options["lab_template"],
                size=1,
                prestarted_vms=1,
            )
        )
    return f"{made} The pool {LAB_POOL} (1 VM, kept running) in cluster {options['lab']}."


def register() -> None:
    demo.register("pool", seed, rank=20)

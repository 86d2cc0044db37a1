"""The pool admin role, and what cluster admins and pool users may do with pools."""

from hosts.roles import VM_MANAGE
from project.access import roles

POOL_MANAGE = [
    "pools.view_vmpool",
    "pools.add_vmpool",
    "pools.change_vmpool",
    "pools.delete_vmpool",
    "pools.allocate_vmpool",
    "pools.return_vmpool",
]


def register() -> None:
    roles.define(
        "PoolAdmin",
        "Manages VM pools and their VMs, and grants users the use of them.",
        [
            # A pool is created in a cluster, which the creator must be able to name.
            "hosts.view_cluster",
            *POOL_MANAGE,
            *VM_MANAGE,
            "hosts.view_template",
            "project.manage_grants",
        ],
    )
    roles.contribute("ClusterAdmin", POOL_MANAGE)
    roles.contribute("UserRole", ["pools.view_vmpool", "pools.allocate_vmpool"])

"""The lease roles: who may reserve capacity, and who holds a lease."""

from hosts.roles import VM_USE
from project.access import roles


def register() -> None:
    roles.define(
        "LeaseUser",
        "Creates leases; becomes LeaseOwner of each lease it creates.",
        ["leases.add_lease"],
    )
    roles.define(
        "LeaseOwner",
        "Sees, changes and deletes the leases it is granted on, and uses their VMs.",
        [
            "leases.view_lease",
            "leases.change_lease",
            "leases.delete_lease",
            "leases.view_reservation",
            "hosts.add_virtualmachine",
            "hosts.view_template",
            # The images its VMs may boot from instead of their template's (Nova's imageRef).
            "hosts.view_image",
            *VM_USE,
        ],
    )

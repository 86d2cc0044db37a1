"""The built-in roles of the inventory: cluster admins, VM creators and VM users."""

from project.access import roles

VM_USE = [
    "hosts.view_virtualmachine",
    "hosts.operate_virtualmachine",
    "hosts.view_job",
    "hosts.cancel_job",
]
VM_MANAGE = VM_USE + [
    "hosts.change_virtualmachine",
    "hosts.delete_virtualmachine",
    "hosts.migrate_virtualmachine",
]


def register() -> None:
    roles.define(
        "ClusterAdmin",
        "Manages clusters: hosts, templates, VMs, pools and grants in them.",
        [
            "hosts.view_cluster",
            "hosts.add_cluster",
            "hosts.change_cluster",
            "hosts.delete_cluster",
            "hosts.view_host",
            "hosts.add_host",
            "hosts.change_host",
            "hosts.delete_host",
            "hosts.view_externaldomain",
            "hosts.view_template",
            "hosts.add_template",
            "hosts.change_template",
            "hosts.delete_template",
            "hosts.view_image",
            "hosts.add_image",
            "hosts.change_image",
            "hosts.delete_image",
            "hosts.add_virtualmachine",
            *VM_MANAGE,
            "project.manage_grants",
        ],
    )
    roles.define(
        "PowerUser",
        "Creates VMs; becomes UserVmManager of each VM it creates.",
        [
            "hosts.view_cluster",
            "hosts.view_template",
            "hosts.view_image",
            "hosts.add_virtualmachine",
        ],
    )
    roles.define("UserVmManager", "Uses, changes and deletes the VMs it is granted on.", VM_MANAGE)
    roles.define(
        "UserRole",
        "Uses the VMs granted to it, and takes VMs from the pools granted to it.",
        VM_USE,
    )

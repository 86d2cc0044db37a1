"""Admin console screens for the inventory, jobs and external domains.

``clusters`` holds clusters, hosts and templates, ``vms`` the VMs, ``snapshots`` their
snapshots, ``jobs`` jobs and external domains, ``quotas`` the quotas. Importing this package
registers them all (admin autodiscovery imports it); the apps above extend some of them
(``project.admin.base.extend_admin``) when they are imported.
"""

from hosts.admin.clusters import (
    HOST_PAGE_ROWS,
    ONLY_VISIBLE,
    ClusterAdmin,
    HostAdmin,
    HostInline,
    TemplateAdmin,
    load_bar,
)
from hosts.admin.images import ImageAdmin, ImageCopyInline
from hosts.admin.jobs import ExternalDomainAdmin, JobAdmin
from hosts.admin.quotas import QuotaAdmin
from hosts.admin.snapshots import VmSnapshotAdmin
from hosts.admin.vms import ADMIN_VM_ACTIONS, VirtualMachineAdmin

__all__ = [
    "HOST_PAGE_ROWS",
    "ONLY_VISIBLE",
    "ADMIN_VM_ACTIONS",
    "ClusterAdmin",
    "ExternalDomainAdmin",
    "HostAdmin",
    "HostInline",
    "ImageAdmin",
    "ImageCopyInline",
    "JobAdmin",
    "QuotaAdmin",
    "TemplateAdmin",
    "VirtualMachineAdmin",
    "VmSnapshotAdmin",
    "load_bar",
]

"""The inventory (clusters, hosts, templates, VMs) and the jobs that change it."""

from hosts.models.guests import ConsoleKind, ConsoleLog, ConsoleTicket
from hosts.models.images import (
    CopyState,
    Image,
    ImageCopy,
    ImageFormat,
    ImageKind,
    ImageMember,
    ImageStatus,
    ImageVisibility,
    MemberStatus,
)
from hosts.models.inventory import (
    HOLDING_STATUSES,
    STATIONARY_STATUSES,
    Cluster,
    Host,
    HostStatus,
    HostStatusReason,
    OsType,
    PowerState,
    Template,
    TemplateVisibility,
    VirtualMachine,
    VmStatus,
)
from hosts.models.jobs import ExternalDomain, Job, JobJournal, JobKind, JobState
from hosts.models.quotas import Quota
from hosts.models.samples import HostHourSample, HostSample, VmHourSample, VmSample
from hosts.models.snapshots import SnapshotStatus, VmSnapshot

__all__ = [
    "HOLDING_STATUSES",
    "STATIONARY_STATUSES",
    "SnapshotStatus",
    "Cluster",
    "CopyState",
    "ConsoleLog",
    "ConsoleKind",
    "ConsoleTicket",
    "ExternalDomain",
    "Host",
    "HostHourSample",
    "HostSample",
    "HostStatus",
    "HostStatusReason",
    "Image",
    "ImageCopy",
    "ImageFormat",
    "ImageKind",
    "ImageMember",
    "ImageStatus",
    "ImageVisibility",
    "Job",
    "JobJournal",
    "JobKind",
    "JobState",
    "MemberStatus",
    "OsType",
    "PowerState",
    "Quota",
    "Template",
    "TemplateVisibility",
    "VirtualMachine",
    "VmHourSample",
    "VmSample",
    "VmSnapshot",
    "VmStatus",
]

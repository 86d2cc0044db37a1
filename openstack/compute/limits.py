"""Limits (``/limits``): what Corral limits the caller to, in Nova's absolute limits; -1
where Corral sets no limit, as Nova says "unlimited".

Corral limits a user's SSH keys (``project.sshkeys.MAX_KEYS_PER_USER``) and, when configured,
what their leases may hold at once (``LEASE_QUOTA_*``). The lease quotas bound the caller's
instances, cores and RAM only when leases are the caller's one way to VMs: whoever may create
VMs from templates (``hosts.add_virtualmachine`` anywhere) is not limited in total. A pool's
limit per user is per pool, no total. Used figures count the VMs the caller holds.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models import Count, Sum
from rest_framework.response import Response

from hosts.models import VirtualMachine
from openstack.compute.base import NovaView
from openstack.models import NovaServerGroup
from project.permissions import holds
from project.sshkeys import MAX_KEYS_PER_USER

UNLIMITED = -1


def _quota(value: int) -> int:
    return value if value > 0 else UNLIMITED


def absolute_limits(user, *, with_network: bool) -> dict:
    leases_only = not holds(user, "hosts.add_virtualmachine")
    held = VirtualMachine.objects.filter(owner=user).aggregate(
        instances=Count("pk"), cores=Sum("vcpus"), ram=Sum("memory_mb")
    )
    limits = {
        "maxTotalInstances": _quota(settings.LEASE_QUOTA_INSTANCES) if leases_only else UNLIMITED,
        "maxTotalCores": _quota(settings.LEASE_QUOTA_VCPUS) if leases_only else UNLIMITED,
        "maxTotalRAMSize": _quota(settings.LEASE_QUOTA_MEMORY_MB) if leases_only else UNLIMITED,
        "totalInstancesUsed": held["instances"],
        "totalCoresUsed": held["cores"] or 0,
        "totalRAMUsed": held["ram"] or 0,
        "maxTotalKeypairs": MAX_KEYS_PER_USER,
        "maxServerMeta": UNLIMITED,
        "maxImageMeta": UNLIMITED,
        "maxPersonality": UNLIMITED,
        "maxPersonalitySize": UNLIMITED,
        "maxServerGroups": UNLIMITED,
        "maxServerGroupMembers": UNLIMITED,
        "totalServerGroupsUsed": NovaServerGroup.objects.filter(user=user).count(),
    }
    if with_network:  # proxied to Neutron by Nova before 2.36; Corral has none of them
        limits |= {
            "maxSecurityGroups": UNLIMITED,
            "maxSecurityGroupRules": UNLIMITED,
            "maxTotalFloatingIps": UNLIMITED,
            "totalSecurityGroupsUsed": 0,
            "totalFloatingIpsUsed": 0,
        }
    return limits


class LimitsView(NovaView):
    def get(self, request):
        absolute = absolute_limits(request.user, with_network=not self.at_least(2, 36))
        return Response({"limits": {"rate": [], "absolute": absolute}})

"""Limits (``/limits``): what Corral limits the caller to, in Nova's absolute limits; -1
where Corral sets no limit, as Nova says "unlimited".

Corral limits a user's SSH keys (``project.sshkeys.MAX_KEYS_PER_USER``) and, when configured,
what their leases may hold at once (``LEASE_QUOTA_*``). The lease quotas bound the caller's
instances, cores and RAM only when leases are the caller's one way to VMs: whoever may create
VMs from templates (``hosts.add_virtualmachine`` anywhere) is not limited in total. A pool's
limit per user is per pool, no total. Used figures count the VMs the caller holds.
"""

from __future__ import annotations

from rest_framework.response import Response

from openstack.compute.base import NovaView
from openstack.compute.queries import absolute_limits


class LimitsView(NovaView):
    def get(self, request):
        absolute = absolute_limits(request.user, with_network=not self.at_least(2, 36))
        return Response({"limits": {"rate": [], "absolute": absolute}})

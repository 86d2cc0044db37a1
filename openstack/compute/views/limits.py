"""Limits (``/limits``): what Corral limits the caller to, in Nova's absolute limits; -1
where Corral sets no limit, as Nova says "unlimited".

Corral limits what a user holds at once with its quotas (``hosts.quotas``: the most generous
of their own, their groups' and the default limits; superusers have none): instances, cores
and RAM are those limits and what the caller holds (the VMs they own, a pool's VMs they hold
among them), as ``os-quota-sets`` shows them (openstack/compute/quota_sets.py). Corral also
limits a user's SSH keys (``project.sshkeys.MAX_KEYS_PER_USER``). A lease's own capacity
rules (``LEASE_QUOTA_*``, over what leases reserve in a period) are Blazar's, not shown here.
"""

from __future__ import annotations

from rest_framework.response import Response

from openstack.compute.base import NovaView
from openstack.compute.quota_sets import absolute_limits


class LimitsView(NovaView):
    def get(self, request):
        absolute = absolute_limits(request.user, with_network=not self.at_least(2, 36))
        return Response({"limits": {"rate": [], "absolute": absolute}})

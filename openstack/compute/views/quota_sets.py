"""Quota sets (``os-quota-sets``): a project's quotas (a project is a user), their defaults
and their use; admins set and reset them (openstack/compute/quota_sets.py).

Nova's policy: a user reads their own project's quotas, and another project's is a 403;
whoever may see everyone's quotas in Corral (``hosts.quotas.may_see_quotas``) reads any, and
whoever may set them (``hosts.quotas.may_set_quotas``, the admin console's rule) sets and
resets any. ``user_id`` (Nova's per-user quotas within a project) is ignored: a Corral project
has one user.
"""

from __future__ import annotations

from rest_framework import status
from rest_framework.response import Response

from hosts import quotas
from openstack.compute import quota_sets
from openstack.compute.base import NovaView, policy_refused


class QuotaSetBase(NovaView):
    def project(self, project_id: str, rule: str, *, write: bool = False):
        """The user whose quotas the request is about, if the caller may act on them."""
        caller = self.request.user
        allowed = quotas.may_set_quotas(caller) if write else quotas.may_see_quotas(caller)
        if not allowed and (write or project_id != str(caller.pk)):
            raise policy_refused(f"os_compute_api:os-quota-sets:{rule}")
        return quota_sets.project_user(project_id)

    @property
    def with_network(self) -> bool:
        return not self.at_least(2, 36)


class QuotaSetView(QuotaSetBase):
    def get(self, request, project_id: str):
        user = self.project(project_id, "show")
        values = quota_sets.quota_set(user, with_network=self.with_network)
        return Response({"quota_set": {"id": project_id} | values})

    def put(self, request, project_id: str):
        user = self.project(project_id, "update", write=True)
        quota_sets.update_quota(user, self.body("quota_set"))
        return Response({"quota_set": quota_sets.quota_set(user, with_network=self.with_network)})

    def delete(self, request, project_id: str):
        user = self.project(project_id, "delete", write=True)
        quota_sets.reset_quota(user)
        return Response(status=status.HTTP_202_ACCEPTED)


class QuotaSetDetailView(QuotaSetBase):
    def get(self, request, project_id: str):
        user = self.project(project_id, "detail")
        values = quota_sets.detailed_set(user, with_network=self.with_network)
        return Response({"quota_set": {"id": project_id} | values})


class QuotaSetDefaultsView(QuotaSetBase):
    def get(self, request, project_id: str):
        self.project(project_id, "defaults")
        values = quota_sets.default_set(with_network=self.with_network)
        return Response({"quota_set": {"id": project_id} | values})

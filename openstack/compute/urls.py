"""Nova's URLs under /compute/v2.1 (each with or without a trailing slash, and without the
project id older clients put after the version: Corral's catalog names none)."""

from django.urls import re_path

from openstack.compute.base import not_found
from openstack.compute.views import (
    availability_zones,
    flavor_extras,
    flavors,
    hypervisors,
    keypairs,
    limits,
    quota_sets,
    server_actions,
    server_groups,
    servers,
    versions,
)

V = r"^compute/v2\.1"
FLAVOR = r"(?P<flavor_id>[^/]+)"
SERVER = r"(?P<server_id>[^/]+)"
HYPERVISOR = r"(?P<hypervisor_id>[^/]+)"
PATTERN = r"(?P<pattern>[^/]+)"
PROJECT = r"(?P<project_id>[^/]+)"

urlpatterns = [
    re_path(r"^compute/?$", versions.VersionsView.as_view(), name="nova-versions"),
    re_path(rf"{V}/?$", versions.VersionView.as_view(), name="nova-version"),
    re_path(rf"{V}/flavors/?$", flavors.FlavorsView.as_view(), name="nova-flavors"),
    re_path(rf"{V}/flavors/detail/?$", flavors.FlavorsDetailView.as_view()),
    re_path(rf"{V}/flavors/{FLAVOR}/?$", flavors.FlavorView.as_view(), name="nova-flavor"),
    re_path(rf"{V}/servers/?$", servers.ServersView.as_view(), name="nova-servers"),
    re_path(rf"{V}/servers/detail/?$", servers.ServersDetailView.as_view()),
    re_path(rf"{V}/servers/{SERVER}/?$", servers.ServerView.as_view(), name="nova-server"),
    re_path(rf"{V}/servers/{SERVER}/action/?$", server_actions.ServerActionView.as_view()),
    re_path(rf"{V}/servers/{SERVER}/remote-consoles/?$", servers.RemoteConsolesView.as_view()),
    re_path(rf"{V}/servers/{SERVER}/ips/?$", servers.ServerIpsView.as_view()),
    re_path(
        rf"{V}/servers/{SERVER}/os-security-groups/?$", servers.ServerSecurityGroupsView.as_view()
    ),
    re_path(rf"{V}/servers/{SERVER}/metadata/?$", servers.ServerMetadataView.as_view()),
    re_path(
        rf"{V}/servers/{SERVER}/metadata/(?P<key>[^/]+)/?$",
        servers.ServerMetadataItemView.as_view(),
    ),
    re_path(
        rf"{V}/flavors/{FLAVOR}/os-extra_specs/?$", flavor_extras.FlavorExtraSpecsView.as_view()
    ),
    re_path(
        rf"{V}/flavors/{FLAVOR}/os-extra_specs/(?P<key>[^/]+)/?$",
        flavor_extras.FlavorExtraSpecView.as_view(),
    ),
    re_path(rf"{V}/flavors/{FLAVOR}/os-flavor-access/?$", flavor_extras.FlavorAccessView.as_view()),
    re_path(rf"{V}/os-keypairs/?$", keypairs.KeypairsView.as_view(), name="nova-keypairs"),
    re_path(rf"{V}/os-keypairs/(?P<name>[^/]+)/?$", keypairs.KeypairView.as_view()),
    re_path(
        rf"{V}/os-server-groups/?$",
        server_groups.ServerGroupsView.as_view(),
        name="nova-server-groups",
    ),
    re_path(
        rf"{V}/os-server-groups/(?P<group_id>[^/]+)/?$", server_groups.ServerGroupView.as_view()
    ),
    re_path(
        rf"{V}/os-hypervisors/?$", hypervisors.HypervisorsView.as_view(), name="nova-hypervisors"
    ),
    re_path(rf"{V}/os-hypervisors/detail/?$", hypervisors.HypervisorsDetailView.as_view()),
    re_path(rf"{V}/os-hypervisors/statistics/?$", hypervisors.HypervisorStatisticsView.as_view()),
    re_path(rf"{V}/os-hypervisors/{PATTERN}/search/?$", hypervisors.HypervisorSearchView.as_view()),
    re_path(
        rf"{V}/os-hypervisors/{PATTERN}/servers/?$", hypervisors.HypervisorServersView.as_view()
    ),
    re_path(
        rf"{V}/os-hypervisors/{HYPERVISOR}/uptime/?$", hypervisors.HypervisorUptimeView.as_view()
    ),
    re_path(rf"{V}/os-hypervisors/{HYPERVISOR}/?$", hypervisors.HypervisorView.as_view()),
    re_path(
        rf"{V}/os-quota-sets/{PROJECT}/?$",
        quota_sets.QuotaSetView.as_view(),
        name="nova-quota-set",
    ),
    re_path(rf"{V}/os-quota-sets/{PROJECT}/detail/?$", quota_sets.QuotaSetDetailView.as_view()),
    re_path(rf"{V}/os-quota-sets/{PROJECT}/defaults/?$", quota_sets.QuotaSetDefaultsView.as_view()),
    re_path(rf"{V}/limits/?$", limits.LimitsView.as_view(), name="nova-limits"),
    re_path(
        rf"{V}/os-availability-zone/?$",
        availability_zones.AvailabilityZonesView.as_view(),
        name="nova-availability-zones",
    ),
    re_path(
        rf"{V}/os-availability-zone/detail/?$",
        availability_zones.AvailabilityZonesDetailView.as_view(),
    ),
    re_path(r"^compute/.*$", not_found),
]

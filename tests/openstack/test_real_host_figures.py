"""One host, one set of figures: its own CPUs and memory (what Nova's hypervisors and Blazar's
hosts show, as Nova reports a compute node's) and what VMs may be given there under the
cluster's overcommit (what the scheduler places against and leases reserve, shown beside the
size by the admin console and Corral's API), seen through every place that shows or counts
them: the admin console, /api/, the scheduler, lease planning, and the real ``openstack`` CLI's
``hypervisor list`` and ``reservation host list``."""

from __future__ import annotations

import re

import pytest
from rest_framework.test import APIClient

from leases.capacity import reservable_rooms
from scheduling.scheduler import build_context
from tests.leases.fixtures import at
from tests.openstack.conftest import as_json
from tests.project.admin.fixtures import admin_url, logged_in

pytestmark = pytest.mark.slow


def bar(html: str, resource: str) -> tuple[int, int, int]:
    """(used, capacity, the host's own size) of the admin console's load bar."""
    match = re.search(
        rf'data-resource="{resource}" data-used="(\d+)" data-capacity="(\d+)" '
        rf'data-size="(\d+)"',
        html,
    )
    assert match, f"no {resource} load bar with the host's size on the page"
    return int(match[1]), int(match[2]), int(match[3])


def test_a_hosts_size_and_capacity_are_the_same_figures_everywhere(
    cloud, admin_user, make_cluster, make_host, make_vm
):
    # 25 CPUs x 4.6 is 114.99999999999999 in floating point: 115 vCPUs, never 114.
    cluster = make_cluster("zone-a", cpu_overcommit_ratio=4.6, memory_overcommit_percent=150)
    host = make_host(
        cluster=cluster, name="node1", status="up", reservable=True, cpus=25, memory_mb=3072
    )
    make_vm(cluster, host=host, status="up", vcpus=2, memory_mb=1024)
    api = APIClient()
    api.force_authenticate(admin_user)
    run = cloud(admin_user.username)

    page = logged_in(admin_user).get(admin_url("hosts.Host", "changelist")).content.decode()
    shown = api.get(f"/api/hosts/{host.pk}/").json()
    (placed,) = build_context(cluster, None, "start").hosts
    room = reservable_rooms(at(10), at(12), lock=False)[host.pk]
    hypervisors = as_json(run("hypervisor", "list", "--long", "-f", "json"))
    reservable = as_json(run("reservation", "host", "list", "-f", "json"))

    assert bar(page, "vcpus") == (2, 115, 25)
    assert bar(page, "memory") == (1024, 4608, 3072)
    assert "25 CPUs × 4.6" in page
    assert (shown["cpus"], shown["vcpu_capacity"]) == (25, 115)
    assert (shown["memory_mb"], shown["memory_capacity_mb"]) == (3072, 4608)
    assert (placed.cpus, placed.vcpu_capacity, placed.memory_capacity_mb) == (25, 115, 4608)
    assert (room.cpus, room.memory_mb) == (115, 4608)
    assert [(h["vCPUs"], h["vCPUs Used"], h["Memory MB"]) for h in hypervisors] == [(25, 2, 3072)]
    assert [(h["vcpus"], h["memory_mb"]) for h in reservable] == [(25, 3072)]

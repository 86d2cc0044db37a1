"""Every admin page Corral adds or customizes, on a phone (390 px) and a laptop (1366 px): the
document never scrolls sideways (a changelist's table may, inside its own box) and axe-core finds
no serious or critical violation.

A page is one entry of PAGES, like the portal's in test_accessibility.py; add new admin pages
there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from hosts import samples
from hosts.models import Cluster, ClusterSample, Host, HostSample, VirtualMachine, VmStatus
from leases.models import Lease
from pools import services as pool_services
from pools.models import VmPool
from tests.browser.accessibility import (
    LAPTOP,
    PHONE,
    blocking_violations,
    sideways_scroll,
    too_wide,
)
from tests.browser.test_admin_grants import log_in_to_console
from tests.browser.test_vm_day_charts import a_day_of_vm_figures
from tests.hosts.admin.test_host_keys_admin import new_key
from tests.leases.fixtures import at, instances
from tests.pools.fixtures import add_pool_vms

pytestmark = pytest.mark.slow

# Django admin's stylesheets @import others; axe-core reads those by inserting <style> elements,
# which the Content-Security-Policy blocks (and the tests report). Without that reading axe skips
# only css-orientation-lock, and no stylesheet of the admin locks the orientation.
AXE_OPTIONS = {"preload": False}


@dataclass(frozen=True)
class Console:
    """What the pages show: a cluster with a host, a pool with a VM taken, and a lease."""

    cluster: Cluster
    host: Host
    pool: VmPool
    vm: VirtualMachine
    lease: Lease


@dataclass(frozen=True)
class AdminPage:
    name: str
    path: Callable[[Console], str]
    then: Callable[[Page], None] | None = None  # what to do once there


def _open_the_object_picker(page: Page) -> None:
    page.locator(".field-object .select2-selection").click()
    expect(page.locator(".select2-results__option[role=option]").first).to_be_visible()


def _ask_to_trust_their_keys(page: Page) -> None:
    page.locator("#action-toggle").check()
    page.locator("select[name=action]").select_option("trust_offered_host_keys")
    page.get_by_role("button", name="Go").click()
    expect(page.locator("#host-keys-to-trust")).to_be_visible()


PAGES = [
    AdminPage("dashboard", lambda c: "/admin/"),
    AdminPage("a cluster", lambda c: f"/admin/hosts/cluster/{c.cluster.pk}/change/"),
    AdminPage("a host", lambda c: f"/admin/hosts/host/{c.host.pk}/change/"),
    AdminPage("trust host keys", lambda c: "/admin/hosts/host/", _ask_to_trust_their_keys),
    AdminPage("pools", lambda c: "/admin/pools/vmpool/"),
    AdminPage("a pool", lambda c: f"/admin/pools/vmpool/{c.pool.pk}/change/"),
    AdminPage("a VM", lambda c: f"/admin/hosts/virtualmachine/{c.vm.pk}/change/"),
    AdminPage("leases", lambda c: "/admin/leases/lease/"),
    AdminPage("a lease", lambda c: f"/admin/leases/lease/{c.lease.pk}/change/"),
    AdminPage("capacity", lambda c: f"/admin/leases/lease/capacity/{c.cluster.pk}/"),
    AdminPage("grant a role", lambda c: "/admin/project/usergrant/add/", _open_the_object_picker),
]


def _a_day_of_figures(host: Host) -> None:
    """The host's points of the last day, for its page's charts."""
    now = samples.minute_of(timezone.now())
    HostSample.objects.bulk_create(
        HostSample(
            host=host,
            at=now - timedelta(minutes=m),
            cpu_percent=(m * 7) % 100,
            memory_given_mb=512,
            memory_used_mb=256,
            vms_running=2,
        )
        for m in range(24 * 60)
    )


def _a_day_of_cluster_figures(cluster: Cluster) -> None:
    """The cluster's points of the last day, for its page's and the dashboard's charts."""
    now = samples.minute_of(timezone.now())
    ClusterSample.objects.bulk_create(
        ClusterSample(
            cluster=cluster,
            at=now - timedelta(minutes=m),
            cpu_percent=(m * 7) % 100,
            memory_given_mb=512,
            memory_capacity_mb=2048,
            vms_up=2 + m % 3,
            vms_paused=m % 2,
            vms_down=1,
            vms_changing=m % 5 == 0,
            vms_unknown=0,
            pool_vms_free=1,
            pool_vms_taken=1,
        )
        for m in range(24 * 60)
    )


@pytest.fixture
def console(
    make_user, make_pool, make_template, pool_user, reservable_hosts, make_lease, make_host
):
    host = reservable_hosts(1)[0]
    cluster = host.cluster
    # A qemu+ssh host waiting for its key to be trusted (never reached: no sync runs here).
    make_host(cluster, name="kvm-ssh", ssh_host_key_offered=new_key())
    pool = make_pool(cluster=cluster, template=make_template(), size=2)
    add_pool_vms(pool, [VmStatus.UP, VmStatus.UP], host=host)
    user = pool_user(pool)
    vm = pool_services.allocate_vm(pool, user).vm
    lease = make_lease(at(9, day=1), at(17, day=1), instances(1), owner=user, name="nightly")
    _a_day_of_figures(host)
    _a_day_of_cluster_figures(cluster)
    a_day_of_vm_figures(vm)
    return Console(cluster=cluster, host=host, pool=pool, vm=vm, lease=lease)


@pytest.mark.parametrize("viewport", [PHONE, LAPTOP], ids=["phone", "laptop"])
def test_every_admin_page_fits_the_screen_and_has_no_serious_accessibility_violation(
    new_page, make_user, console, viewport
):
    page = new_page()
    page.set_viewport_size(viewport)
    log_in_to_console(page, make_user("operator", superuser=True))
    problems = []
    for entry in PAGES:
        page.goto(entry.path(console))
        if entry.then:
            entry.then(page)
        if overflow := sideways_scroll(page):
            problems.append(f"{entry.name}: scrolls {overflow} px sideways ({too_wide(page)})")
        problems += [f"{entry.name}: {v}" for v in blocking_violations(page, options=AXE_OPTIONS)]

    assert not problems, "\n".join(problems)

"""A host of the simulated cluster that is lost (its daemon killed), for the failover and
fencing tests."""

import pytest

from hosts import driver, sync
from hosts.models import Host
from hosts.operations import spec_for
from lab import simhosts


@pytest.fixture
def lost_host(fragile_daemon, sim_hosts, make_vm, small_template):
    """(host, {"ha": …, "plain": …, "ha_stopped": …}): a fourth host of the simulated cluster
    that ran an HA VM and a plain one (and had an HA VM stopped), then stopped responding."""
    cluster = sim_hosts[0].cluster
    host = Host.objects.create(name="lost", cluster=cluster, uri=fragile_daemon.uri)
    sync.sync_host(host.pk)
    vms = {}
    for key, ha, running in (
        ("ha", True, True),
        ("plain", False, True),
        ("ha_stopped", True, False),
    ):
        vm = make_vm(cluster=cluster, template=small_template, host=host, highly_available=ha)
        driver.define(host.uri, spec_for(vm))
        if running:
            driver.start(host.uri, str(vm.uuid))
        vms[key] = vm
    sync.sync_host(host.pk)
    simhosts.kill(fragile_daemon)
    sync.sync_host(host.pk)
    host.refresh_from_db()
    assert host.status == "non_responsive"
    return host, vms

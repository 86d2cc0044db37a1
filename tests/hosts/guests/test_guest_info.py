"""The guest-info loop on simulated hosts (libvirt's test driver over a real daemon): what the
host answers for a guest's addresses is stored, a stopped guest's are cleared, and a round that
finds nothing new writes nothing. On real QEMU: tests/hosts/guests/test_guest_access.py."""

import pytest

from hosts import driver, sync
from hosts.driver.libvirt import guests
from hosts.guests import guestinfo
from hosts.models import Host, VirtualMachine
from hosts.operations import spec_for
from hosts.sync.loop import Syncer
from tests.conftest import wait_until


@pytest.fixture
def placed(make_vm, make_template, sim_cluster):
    """placed(host) -> a VM running on ``host`` with a NIC on its network "default"."""
    template = make_template(memory_mb=128, vcpus=1, disk_gb=1, networks=["default"])

    def make(host: Host) -> VirtualMachine:
        vm = make_vm(cluster=sim_cluster, template=template)
        VirtualMachine.objects.filter(pk=vm.pk).update(host=host)
        vm.refresh_from_db()
        driver.define(host.uri, spec_for(vm))
        driver.start(host.uri, str(vm.uuid))
        return sync.reconcile_vm(vm.pk)

    return make


def test_the_syncer_reads_the_guests_on_the_up_hosts_it_holds(transactional_db, sim_hosts, placed):
    """The task cluster's syncer, not a loop of the ticker, reads guests: on its own threads,
    for the hosts it holds (hosts.sync.shard) and found Up."""
    up, resting = sim_hosts[0], sim_hosts[1]
    on_up, on_resting = placed(up), placed(resting)
    VirtualMachine.objects.filter(pk__in=[on_up.pk, on_resting.pk]).update(ip_addresses=[])
    Host.objects.filter(pk=resting.pk).update(status="maintenance")  # still answers
    answers = guests.guest_info(up.uri, {str(on_up.uuid): (True, -1)})
    syncer = Syncer("guest-info-test")

    def read() -> list[str]:
        syncer.round()
        return VirtualMachine.objects.get(pk=on_up.pk).ip_addresses

    try:
        addresses = wait_until(read, timeout=20, message="the guest's addresses were not read")
    finally:
        syncer.stop()

    assert addresses == answers[str(on_up.uuid)].addresses
    assert VirtualMachine.objects.get(pk=on_resting.pk).ip_addresses == []
    assert Host.objects.get(pk=up.pk).sync_owner == ""  # handed back when the syncer stopped


def test_a_guests_addresses_are_stored_and_cleared_when_it_stops(
    sim_hosts, placed, django_assert_max_num_queries
):
    host = sim_hosts[0]
    vms = [placed(host) for _ in range(3)]
    guestinfo.refresh_host(host.pk)
    reported = {str(vm.uuid): guests.guest_info(host.uri, {str(vm.uuid): (True, -1)}) for vm in vms}

    with django_assert_max_num_queries(4):
        assert guestinfo.refresh_host(host.pk) == 0  # nothing new: nothing written
    driver.power_off(host.uri, str(vms[0].uuid))
    guestinfo.refresh_host(host.pk)

    stored = {vm.pk: VirtualMachine.objects.get(pk=vm.pk).ip_addresses for vm in vms}
    assert all(stored[vm.pk] for vm in vms[1:])
    for vm in vms[1:]:
        assert stored[vm.pk] == reported[str(vm.uuid)][str(vm.uuid)].addresses
    assert stored[vms[0].pk] == []

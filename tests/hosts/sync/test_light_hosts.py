"""Light simulated hosts (one process, no libvirt) go through the same driver calls and sync
as libvirt hosts; an unchanged report writes nothing."""

import uuid

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from hosts import driver, sync
from hosts.models import ExternalDomain, Host, VirtualMachine
from hosts.operations import spec_for
from project.models import Event, EventKind

WRITES = ("INSERT", "UPDATE", "DELETE")


def _writes(queries) -> list[str]:
    return [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith(WRITES)]


@pytest.fixture
def light_vm(light_hosts, make_vm, small_template):
    """light_vm(vms=0) -> a VM defined and running on a new light host (with ``vms`` more
    domains Corral does not manage), its row set from what the host reports."""

    def make(vms: int = 0) -> VirtualMachine:
        [host] = light_hosts(1, vms=vms)
        vm = make_vm(cluster=host.cluster, template=small_template)
        driver.define(host.uri, spec_for(vm))
        driver.start(host.uri, str(vm.uuid))
        VirtualMachine.objects.filter(pk=vm.pk).update(host=host)
        return sync.reconcile_vm(vm.pk)

    return make


def test_a_vm_stopped_behind_corrals_back_on_a_light_host_is_seen_down_with_an_alert(light_vm):
    vm = light_vm(vms=3)
    host = vm.host
    assert sync.sync_host(host.pk).host_status == "up"
    assert vm.status == "up"

    call_command("simhosts", "light-change", host.name, vm.name, "shutoff")
    sync.sync_host(host.pk)

    vm.refresh_from_db()
    assert (vm.status, vm.power_state) == ("down", "shutoff")
    alerts = Event.objects.filter(kind=EventKind.ALERT, object_type="vm", object_id=vm.pk)
    assert list(alerts.values_list("message", flat=True)) == [
        f"VM {vm.name} stopped outside Corral"
    ]
    # The domains Corral does not manage are listed, with their state.
    external = ExternalDomain.objects.filter(host=host)
    assert sorted(external.values_list("name", "power_state")) == [
        (f"{host.name}-vm-{n}", "running") for n in (1, 2, 3)
    ]


def test_a_light_host_runs_the_basic_operations_through_the_driver(light_hosts):
    [host] = light_hosts(1)
    spec = driver.DomainSpec(str(uuid.uuid4()), "op-test", vcpus=1, memory_mb=128, disk_gb=1)

    driver.define(host.uri, spec)
    states = [driver.domain_power_state(host.uri, spec.uuid)]
    for step in (driver.start, driver.suspend, driver.resume, driver.power_off):
        step(host.uri, spec.uuid)
        states.append(driver.domain_power_state(host.uri, spec.uuid))
    driver.undefine(host.uri, spec.uuid)

    assert states == ["shutoff", "running", "paused", "running", "shutoff"]
    assert driver.domain_power_state(host.uri, spec.uuid) is None
    with pytest.raises(driver.DomainNotFound):
        driver.start(host.uri, spec.uuid)


def test_a_light_host_says_in_words_it_cannot_do_what_it_does_not_simulate(light_hosts):
    [host] = light_hosts(1)
    uuid_ = str(uuid.uuid4())
    calls = [
        lambda: driver.keeps_disks(host.uri),
        lambda: driver.write_seed(host.uri, uuid_, b"seed"),
        lambda: driver.guest_info(host.uri, {uuid_: (False, -1)}),
        lambda: driver.screen_port(host.uri, uuid_),
        lambda: driver.open_serial_console(host.uri, uuid_),
        lambda: driver.create_disk(host.uri, "corral", f"{uuid_}.qcow2", 1024),
    ]
    for call in calls:
        with pytest.raises(driver.NotSupported, match="served without libvirt"):
            call()
    assert driver.has_serial_consoles(host.uri) is False


def test_a_light_host_the_simulator_does_not_serve_goes_non_responsive(light_hosts, light_server):
    [host] = light_hosts(1)
    Host.objects.filter(pk=host.pk).update(uri=light_server.uri("nobody-serves-this"))

    assert sync.sync_host(host.pk).host_status == "non_responsive"


def test_syncing_an_unchanged_light_host_writes_no_row(
    light_vm, django_assert_max_num_queries, time_machine
):
    vm = light_vm(vms=20)
    host = vm.host
    # All within one minute, whose point of the host's figures the first report wrote.
    time_machine.move_to(timezone.now(), tick=False)
    # Identical reports are written three times (the repeat count), then never.
    for _ in range(4):
        sync.sync_host(host.pk)

    # Reads only, without a transaction: the host, its VMs, their jobs, its external domains
    # (the balancer's overload clock needs none: the report counted the vCPUs held, and the
    # cluster's threshold was read by an earlier report).
    with django_assert_max_num_queries(4), CaptureQueriesContext(connection) as ctx:
        result = sync.sync_host(host.pk)

    assert (result.host_status, result.vms_written) == ("up", 0)
    assert _writes(ctx.captured_queries) == []


def test_two_hundred_light_hosts_of_twenty_vms_each_are_all_synced(light_hosts):
    hosts = light_hosts(200, vms=20)

    statuses = [sync.sync_host(host.pk).host_status for host in hosts]

    assert statuses == ["up"] * 200
    assert ExternalDomain.objects.filter(host__in=hosts, power_state="running").count() == 4000
    assert Host.objects.filter(pk__in=[h.pk for h in hosts], status="up").count() == 200

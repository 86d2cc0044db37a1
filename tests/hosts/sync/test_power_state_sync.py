"""Power-state sync: the database follows what hosts report, writing only what changed."""

import contextlib
import uuid

import libvirt
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from hosts import driver, jobs, sync
from hosts.models import ExternalDomain, Host, Job, JobKind, VirtualMachine
from hosts.operations import spec_for
from project.models import Event, EventKind
from tests.conftest import wait_until


@contextlib.contextmanager
def outside(host: Host):
    """A second libvirt connection to the host, as an administrator working behind Corral."""
    conn = libvirt.open(host.uri)
    try:
        yield conn
    finally:
        conn.close()


@pytest.fixture
def placed_vm(sim_vm):
    """placed_vm(host, running=True) -> a VM defined (and started) on ``host``, its row
    set from what the host reports."""

    def make(host: Host, *, running: bool = True) -> VirtualMachine:
        vm = sim_vm()
        driver.define(host.uri, spec_for(vm))
        if running:
            driver.start(host.uri, str(vm.uuid))
        VirtualMachine.objects.filter(pk=vm.pk).update(host=host)
        return sync.reconcile_vm(vm.pk)

    return make


def _alerts(vm) -> list[str]:
    return list(
        Event.objects.filter(kind=EventKind.ALERT, object_type="vm", object_id=vm.pk).values_list(
            "message", flat=True
        )
    )


def _vm_updates(queries) -> int:
    return sum('UPDATE "hosts_virtualmachine"' in q["sql"] for q in queries)


# -- writes ------------------------------------------------------------------------------------


def test_repeated_identical_reports_write_the_vm_row_three_times_then_never(sim_vm, sim_hosts):
    host = sim_hosts[0]
    vm = sim_vm(status="up", host=host)
    driver.define(host.uri, spec_for(vm))
    driver.start(host.uri, str(vm.uuid))

    writes = []
    for _ in range(6):
        with CaptureQueriesContext(connection) as queries:
            sync.sync_host(host.pk)
        writes.append(_vm_updates(queries))

    assert writes == [1, 1, 1, 0, 0, 0]
    vm.refresh_from_db()
    assert (vm.power_state, vm.power_state_update_count, vm.status) == ("running", 3, "up")


def test_a_change_after_repeated_reports_is_written_again(placed_vm, sim_hosts):
    host = sim_hosts[0]
    vm = placed_vm(host)
    for _ in range(4):
        sync.sync_host(host.pk)
    driver.suspend(host.uri, str(vm.uuid))

    with CaptureQueriesContext(connection) as queries:
        sync.sync_host(host.pk)

    assert _vm_updates(queries) == 1
    vm.refresh_from_db()
    assert (vm.power_state, vm.power_state_update_count, vm.status) == ("paused", 1, "paused")


# -- changes made outside Corral -----------------------------------------------------------------


def test_a_vm_destroyed_outside_corral_is_down_after_a_sync_with_an_alert(
    placed_vm, sim_hosts, admin_user, client_for
):
    host = sim_hosts[0]
    vm = placed_vm(host)
    with outside(host) as conn:
        conn.lookupByUUIDString(str(vm.uuid)).destroy()

    sync.sync_host(host.pk)

    shown = client_for(admin_user).get(f"/api/vms/{vm.pk}/").json()
    assert (shown["status"], shown["power_state"], shown["host"]) == ("down", "shutoff", host.pk)
    assert _alerts(vm) == [f"VM {vm.name} stopped outside Corral"]


def test_a_vm_started_outside_corral_is_up_after_a_sync_with_an_alert(placed_vm, sim_hosts):
    host = sim_hosts[0]
    vm = placed_vm(host, running=False)
    assert vm.status == "down"
    with outside(host) as conn:
        conn.lookupByUUIDString(str(vm.uuid)).create()

    sync.sync_host(host.pk)

    vm.refresh_from_db()
    assert (vm.status, vm.power_state) == ("up", "running")
    assert _alerts(vm) == [f"VM {vm.name} started outside Corral"]


def test_a_vm_paused_outside_corral_is_paused_after_a_sync(placed_vm, sim_hosts):
    host = sim_hosts[0]
    vm = placed_vm(host)
    with outside(host) as conn:
        conn.lookupByUUIDString(str(vm.uuid)).suspend()

    sync.sync_host(host.pk)

    vm.refresh_from_db()
    assert vm.status == "paused"
    assert _alerts(vm) == [f"VM {vm.name} paused outside Corral"]


def _undefine_outside(host: Host, vm) -> None:
    with outside(host) as conn:
        domain = conn.lookupByUUIDString(str(vm.uuid))
        domain.destroy()
        domain.undefine()


@pytest.fixture
def steady_vm(placed_vm, sim_hosts, settings, time_machine):
    """A VM reported running, unchanged, for longer than two sync intervals. The clock stands
    still from here on: time passes only when the test shifts it."""
    settings.CORRAL_SYNC_INTERVAL = 0.25
    host = sim_hosts[0]
    vm = placed_vm(host)
    time_machine.move_to(timezone.now(), tick=False)
    for _ in range(4):
        sync.sync_host(host.pk)
    time_machine.shift(0.6)
    sync.sync_host(host.pk)
    return vm


def test_a_domain_missing_for_less_than_two_sync_intervals_changes_nothing(steady_vm, sim_hosts):
    host = sim_hosts[0]
    _undefine_outside(host, steady_vm)

    sync.sync_host(host.pk)

    vm = VirtualMachine.objects.get(pk=steady_vm.pk)
    assert (vm.status, vm.power_state, vm.host_id) == ("up", "running", host.pk)
    assert _alerts(vm) == []


def test_a_domain_missing_for_two_sync_intervals_is_report_missing_and_down(
    steady_vm, sim_hosts, admin_user, client_for, time_machine
):
    host = sim_hosts[0]
    _undefine_outside(host, steady_vm)
    sync.sync_host(host.pk)
    time_machine.shift(0.6)

    sync.sync_host(host.pk)

    shown = client_for(admin_user).get(f"/api/vms/{steady_vm.pk}/").json()
    assert (shown["status"], shown["power_state"]) == ("down", "report_missing")
    assert _alerts(steady_vm) == [f"VM {steady_vm.name} disappeared from host {host.name}"]


def test_a_domain_back_within_the_grace_period_changes_nothing(
    steady_vm, sim_hosts, settings, time_machine
):
    host = sim_hosts[0]
    _undefine_outside(host, steady_vm)
    sync.sync_host(host.pk)
    driver.define(host.uri, spec_for(steady_vm))
    driver.start(host.uri, str(steady_vm.uuid))
    time_machine.shift(0.6)

    sync.sync_host(host.pk)

    vm = VirtualMachine.objects.get(pk=steady_vm.pk)
    assert (vm.status, vm.power_state, vm.host_id) == ("up", "running", host.pk)
    assert _alerts(vm) == []


def test_a_vm_reported_on_another_host_follows_it_with_an_alert(placed_vm, sim_hosts):
    source, destination = sim_hosts[0], sim_hosts[1]
    vm = placed_vm(source)
    # Its screen, as the guest-info loop read it on the source.
    VirtualMachine.objects.filter(pk=vm.pk).update(graphics_port=5901)
    driver.migrate(source.uri, destination.uri, str(vm.uuid))

    sync.sync_host(destination.pk)
    sync.sync_host(source.pk)

    vm.refresh_from_db()
    # No console leads to the source's port: none until the loop reads the new host's.
    assert (vm.host_id, vm.status, vm.power_state, vm.graphics_port) == (
        destination.pk,
        "up",
        "running",
        None,
    )
    assert _alerts(vm) == [
        f"VM {vm.name} is running on {destination.name}, not {source.name}: moved outside Corral"
    ]


# -- while a job runs ----------------------------------------------------------------------------


@pytest.fixture
def starting_vm(transactional_db, sim_vm, hooks_dir, settings, tmp_path, job_in_thread):
    """A VM whose start job is held in its vm-post-start hook until ``release()``.

    Yields (vm, job, release); the domain is running and the VM is Starting meanwhile.
    """
    settings.CORRAL_HOOK_TIMEOUT = 15
    flag = tmp_path / "release"
    hooks_dir("vm-post-start", "50-hold", f"while [ ! -e {flag} ]; do sleep 0.05; done")
    vm = sim_vm()
    job = jobs.submit(JobKind.START, vm=vm)
    worker = job_in_thread(job)
    wait_until(lambda: Job.objects.get(pk=job.pk).step == "Running vm-post-start hooks")
    vm.refresh_from_db()

    def release() -> Job:
        flag.touch()
        worker.join(15)
        return Job.objects.get(pk=job.pk)

    yield vm, job, release
    flag.touch()


def test_while_a_job_runs_the_vm_status_is_left_to_the_job(starting_vm):
    vm, job, release = starting_vm
    with outside(vm.host) as conn:
        conn.lookupByUUIDString(str(vm.uuid)).destroy()

    sync.sync_host(vm.host_id)

    during = VirtualMachine.objects.get(pk=vm.pk)
    assert (during.status, during.power_state) == ("starting", "shutoff")
    assert _alerts(vm) == []
    finished = release()
    message = (
        f"VM {vm.name} was shut off outside Corral while it was being started; it is Down now."
    )
    assert (finished.state, finished.error_code) == ("failed", "changed_outside")
    assert finished.error_message == message
    assert VirtualMachine.objects.get(pk=vm.pk).status == "down"
    assert _alerts(vm) == [message]


def test_while_a_job_runs_a_move_to_another_host_still_applies(starting_vm, sim_hosts):
    vm, job, release = starting_vm
    destination = next(h for h in sim_hosts if h.pk != vm.host_id)
    driver.migrate(vm.host.uri, destination.uri, str(vm.uuid))

    sync.sync_host(destination.pk)

    during = VirtualMachine.objects.get(pk=vm.pk)
    assert (during.host_id, during.status) == (destination.pk, "starting")
    finished = release()
    after = VirtualMachine.objects.get(pk=vm.pk)
    assert (after.host_id, after.status) == (destination.pk, "up")
    # The VM runs, as the start job asked, just elsewhere: nothing contradicts the job.
    assert (finished.state, finished.error_code) == ("succeeded", "")


# -- domains Corral does not manage --------------------------------------------------------------


@pytest.fixture
def external_domain(sim_hosts):
    """A running domain on sim-1 that no VM row knows about; removed afterwards."""
    host = sim_hosts[0]
    spec = driver.DomainSpec(
        uuid=str(uuid.uuid4()),
        name=f"hand-made-{uuid.uuid4().hex[:8]}",
        vcpus=1,
        memory_mb=64,
        disk_gb=1,
    )
    driver.define(host.uri, spec)
    driver.start(host.uri, spec.uuid)
    yield host, spec
    driver.undefine(host.uri, spec.uuid)


def test_a_domain_corral_does_not_manage_is_recorded_and_left_running(external_domain):
    host, spec = external_domain

    for _ in range(2):
        sync.sync_host(host.pk)

    recorded = ExternalDomain.objects.get(host=host, uuid=spec.uuid)
    assert (recorded.name, recorded.power_state) == (spec.name, "running")
    assert driver.domain_power_state(host.uri, spec.uuid) == "running"
    assert not VirtualMachine.objects.filter(uuid=spec.uuid).exists()


def test_external_domains_are_listed_for_admins_only(
    external_domain, admin_user, make_user, grant, make_vm, client_for
):
    host, spec = external_domain
    sync.sync_host(host.pk)
    cluster_admin, vm_user = make_user(), make_user()
    grant(cluster_admin, "ClusterAdmin", host.cluster)
    grant(vm_user, "UserVmManager", make_vm(cluster=host.cluster))

    def listed(user):
        response = client_for(user).get("/api/externaldomains/")
        return {d["name"] for d in response.json()["results"]}

    assert spec.name in listed(admin_user)
    assert spec.name in listed(cluster_admin)
    assert listed(vm_user) == set()
    assert client_for(vm_user).get("/api/externaldomains/", {"host": host.pk}).status_code == 400


def test_an_external_domain_that_goes_away_leaves_the_list(external_domain):
    host, spec = external_domain
    sync.sync_host(host.pk)
    driver.undefine(host.uri, spec.uuid)

    sync.sync_host(host.pk)

    assert not ExternalDomain.objects.filter(uuid=spec.uuid).exists()


TEST_DRIVERS_OWN = ("6695eb01-f6a4-8304-79aa-97f2502e193f", "test")


def test_the_test_drivers_own_domain_is_not_listed_for_a_simulated_host(sim_hosts):
    host = sim_hosts[0]
    reported = {(d.uuid, d.name) for d in driver.host_report(host.uri).domains}

    sync.sync_host(host.pk)

    assert TEST_DRIVERS_OWN in reported  # libvirt's test driver made it
    listed = ExternalDomain.objects.filter(host=host).values_list("uuid", "name")
    assert TEST_DRIVERS_OWN not in {(str(uuid), name) for uuid, name in listed}


@pytest.mark.parametrize(
    "uri, uuid_, name",
    [
        ("qemu+ssh://root@kvm-9.example.org/system", *TEST_DRIVERS_OWN),  # a real host's
        ("test+unix:///default?socket=/tmp/x/libvirt-sock", str(uuid.uuid4()), "test"),
        ("test+unix:///default?socket=/tmp/x/libvirt-sock", TEST_DRIVERS_OWN[0], "test-2"),
    ],
)
def test_any_other_domain_named_test_is_listed(make_host, uri, uuid_, name):
    host = make_host(uri=uri, status="up")
    report = driver.HostReport(
        cpus=4,
        memory_mb=1024,
        cpu_model="x86_64",
        domains=[driver.DomainReport(uuid_, name, "running")],
    )

    sync.apply_report(host.pk, report)

    assert ExternalDomain.objects.get(host=host).name == name


# -- many VMs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [50, 500])
def test_syncing_a_host_with_many_vms_takes_a_fixed_number_of_queries(
    sim_cluster, sim_hosts, small_template, django_assert_max_num_queries, count
):
    host = sim_hosts[0]
    vms = VirtualMachine.objects.bulk_create(
        VirtualMachine(
            name=f"bulk-{index}",
            cluster=sim_cluster,
            template=small_template,
            host=host,
            status="up",
            vcpus=1,
            memory_mb=128,
            disk_gb=1,
        )
        for index in range(count)
    )
    report = driver.HostReport(
        cpus=16,
        memory_mb=3072,
        cpu_model="x86_64",
        domains=[driver.DomainReport(str(vm.uuid), vm.name, "running") for vm in vms],
    )

    # Domains other tests left on the shared daemon were recorded when the host was set up;
    # this report has none, and forgetting them would cost a query that depends on test order.
    ExternalDomain.objects.filter(host=host).delete()
    # Every VM row changes here, so the rows are read twice: once to see that the report
    # changes anything, again under the host's lock to write; SQLite splits the bulk update at
    # its parameter limit. The host's load takes up to five more: the cluster's threshold
    # (its cluster, policy and units) and the clock.
    with django_assert_max_num_queries(18):
        result = sync.apply_report(host.pk, report)

    assert result.vms_written == count
    assert VirtualMachine.objects.filter(host=host, power_state="running").count() == count


# -- driven by the ticker --------------------------------------------------------------------------


@pytest.mark.slow
def test_with_a_task_cluster_running_a_vm_destroyed_outside_is_seen_down_within_seconds(
    task_cluster, placed_vm, sim_hosts
):
    host = sim_hosts[0]
    vm = placed_vm(host)
    cluster = task_cluster(CORRAL_TICKER_RUN_SECONDS="1")
    wait_until(
        lambda: VirtualMachine.objects.get(pk=vm.pk).power_state_update_count > 1,
        timeout=15,
        message=lambda: f"the ticker never synced the host: {cluster.log()[-3000:]}",
    )

    with outside(host) as conn:
        conn.lookupByUUIDString(str(vm.uuid)).destroy()

    wait_until(
        lambda: VirtualMachine.objects.get(pk=vm.pk).status == "down",
        timeout=5,
        message=cluster.log()[-3000:],
    )
    assert _alerts(vm) == [f"VM {vm.name} stopped outside Corral"]
    cluster.kill()

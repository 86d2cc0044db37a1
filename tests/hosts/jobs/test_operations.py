"""VM operations end to end: the API queues a job, the job drives a real libvirt host."""

import sys
import threading
import uuid

import pytest
from django.db import close_old_connections, connection

from hosts import driver, jobs
from hosts.host_choice import NoHostAvailable, decision, place
from hosts.models import ConsoleTicket, Host, Job, JobKind, JobState, VirtualMachine
from hosts.operations import OPERATION_BY_KIND
from tests.portal import signed_in

# Jobs run in this process; they commit as a task worker would.
pytestmark = pytest.mark.django_db(transaction=True)


def _operate(client, vm, operation: str, body: dict | None = None) -> dict:
    """POST an operation, run its job here, and return the job as the API shows it."""
    response = client.post(f"/api/vms/{vm.pk}/{operation}/", body or {}, format="json")
    assert response.status_code == 202, response.json()
    assert response.json()["state"] == JobState.PENDING
    jobs.run(response.json()["id"], OPERATION_BY_KIND)
    return client.get(f"/api/jobs/{response.json()['id']}/").json()


def _vm(client, vm) -> dict:
    return client.get(f"/api/vms/{vm.pk}/").json()


def _reported(host_id: int, vm) -> str | None:
    host = Host.objects.get(pk=host_id)
    return driver.domain_power_state(host.uri, str(vm.uuid))


@pytest.fixture
def manager(make_user, grant, client_for):
    """vm -> a client for a user who manages just that VM (UserVmManager on it)."""

    def client_for_vm(vm):
        user = make_user()
        grant(user, "UserVmManager", vm)
        return client_for(user)

    return client_for_vm


# -- start -------------------------------------------------------------------------------------


def test_start_runs_the_vm_on_a_host_that_reports_it_running(sim_vm, manager):
    vm = sim_vm()
    client = manager(vm)

    job = _operate(client, vm, "start")

    shown = _vm(client, vm)
    assert shown["status"] == "up"
    assert shown["host"] is not None
    assert _reported(shown["host"], vm) == "running"
    assert (job["state"], job["progress"], job["error"]) == ("succeeded", 1.0, None)


def _domain_name(vm) -> str:
    """The name the VM's host gives its domain."""
    vm.refresh_from_db()
    report = driver.host_report(vm.host.uri)
    return next(domain.name for domain in report.domains if domain.uuid == str(vm.uuid))


def test_a_vm_s_domain_is_named_from_its_uuid_so_a_domain_named_like_the_vm_does_not_block_it(
    sim_vm, sim_hosts
):
    vm = sim_vm()
    others = []
    for host in sim_hosts:  # another tool's domains, named as the VM is, on every host
        other = driver.DomainSpec(
            uuid=str(uuid.uuid4()), name=vm.name, vcpus=1, memory_mb=64, disk_gb=1
        )
        driver.define(host.uri, other)
        others.append((host.uri, other.uuid))
    try:
        assert (
            jobs.run(jobs.submit(JobKind.START, vm=vm).pk, OPERATION_BY_KIND) == JobState.SUCCEEDED
        )

        assert _domain_name(vm) == f"corral-{vm.uuid}"
    finally:
        for uri, other_uuid in others:
            driver.undefine(uri, other_uuid)


def test_a_vm_defined_before_domains_were_named_from_uuids_keeps_its_domain_name(sim_vm):
    vm = sim_vm()
    VirtualMachine.objects.filter(pk=vm.pk).update(domain_name=vm.name)

    assert jobs.run(jobs.submit(JobKind.START, vm=vm).pk, OPERATION_BY_KIND) == JobState.SUCCEEDED

    assert _domain_name(vm) == vm.name


def test_a_start_job_journals_its_steps(sim_vm, manager):
    vm = sim_vm()

    job = _operate(manager(vm), vm, "start")

    host = Host.objects.get(pk=VirtualMachine.objects.get(pk=vm.pk).host_id)
    journal = [line["message"] for line in job["journal"]]
    assert journal[0] == "Choosing a host"
    assert journal[1].startswith(f"Placed on {host.name}")
    assert journal[2:] == [
        "Writing the cloud-init seed",
        f"{host.name} has no storage pool for a cloud-init seed; the VM boots without",
        f"Defining the VM on {host.name}",
        "Starting the VM",
        "Waiting for the VM to run",
        f"Starting on {host.name} succeeded (try 1)",
    ]
    assert job["result"]["host"] == host.name


def test_start_places_the_vm_only_on_an_up_host_with_enough_free_memory(
    sim_vm, sim_hosts, manager, make_vm, sim_cluster, make_template
):
    in_maintenance, full, free = sim_hosts
    Host.objects.filter(pk=in_maintenance.pk).update(status="maintenance")
    make_vm(
        cluster=sim_cluster,
        template=make_template(memory_mb=3000),
        status="up",
        host=full,
    )
    vm = sim_vm()

    _operate(manager(vm), vm, "start")

    vm.refresh_from_db()
    assert vm.host_id == free.pk
    assert _reported(free.pk, vm) == "running"


def test_start_fails_with_no_host_naming_each_host_and_why(sim_cluster, make_vm, make_template):
    vm = make_vm(cluster=sim_cluster, template=make_template(memory_mb=4096))
    job = jobs.submit(JobKind.START, vm=vm)

    jobs.run(job.pk, OPERATION_BY_KIND)

    job.refresh_from_db()
    assert (job.state, job.error_code) == (JobState.FAILED, "no_host")
    for name in ("sim-1", "sim-2", "sim-3"):
        assert f"{name}: 3072 MiB free, 4096 MiB needed" in job.error_message
    vm.refresh_from_db()
    assert (vm.status, vm.host) == ("down", None)


@pytest.mark.parametrize("kind", [JobKind.START, JobKind.SHUTDOWN, JobKind.MIGRATE])
def test_a_job_whose_vm_was_deleted_before_it_ran_fails_naming_it(sim_vm, kind, caplog):
    vm = sim_vm()
    job = jobs.submit(kind, vm=vm)
    VirtualMachine.objects.filter(pk=vm.pk).delete()

    assert jobs.run(job.pk, OPERATION_BY_KIND) == JobState.FAILED

    job.refresh_from_db()
    assert (job.state, job.error_code) == (JobState.FAILED, "vm_gone")
    assert job.error_message == f"The VM {vm.name} was deleted before this job could run"
    assert not [record for record in caplog.records if record.exc_info]  # no traceback


def test_a_failed_start_is_shown_with_its_error_through_the_api(
    sim_cluster, make_vm, make_template, manager
):
    vm = make_vm(cluster=sim_cluster, template=make_template(memory_mb=4096))
    client = manager(vm)

    job = _operate(client, vm, "start")

    assert job["state"] == "failed"
    assert job["error"]["code"] == "no_host"
    assert "4096 MiB needed" in job["error"]["message"]
    assert job["journal"][-1]["message"].startswith("Failed: No host can run")
    assert _vm(client, vm)["status"] == "down"


# -- stop, suspend, resume ----------------------------------------------------------------------


@pytest.mark.parametrize("operation", ["shutdown", "poweroff"])
def test_stopping_a_running_vm_leaves_it_down_and_shut_off_on_its_host(
    running_vm, manager, operation
):
    vm = running_vm()
    client = manager(vm)

    job = _operate(client, vm, operation)

    assert job["state"] == "succeeded"
    assert _vm(client, vm)["status"] == "down"
    assert _reported(vm.host_id, vm) == "shutoff"


def test_a_vm_started_outside_corral_during_its_shutdown_fails_the_job_and_stays_up(
    running_vm, manager, hooks_dir, tmp_path
):
    vm = running_vm()
    client = manager(vm)
    host = Host.objects.get(pk=vm.host_id)
    # The post-stop hook plays an administrator who starts the domain again behind Corral,
    # after the job saw it stop.
    restart = tmp_path / "restart.py"
    restart.write_text(
        "import libvirt\n"
        f"libvirt.open({host.uri!r}).lookupByUUIDString({str(vm.uuid)!r}).create()\n"
    )
    hooks_dir("vm-post-stop", "50-restart", f"exec {sys.executable} {restart}")

    job = _operate(client, vm, "shutdown")

    assert (job["state"], job["error"]["code"]) == ("failed", "changed_outside")
    assert job["error"]["message"] == (
        f"VM {vm.name} was started outside Corral while it was being shut down; it is Up now."
    )
    assert _vm(client, vm)["status"] == "up"
    assert _reported(vm.host_id, vm) == "running"


def test_suspend_pauses_a_running_vm(running_vm, manager):
    vm = running_vm()
    client = manager(vm)

    job = _operate(client, vm, "suspend")

    assert job["state"] == "succeeded"
    assert _vm(client, vm)["status"] == "paused"
    assert _reported(vm.host_id, vm) == "paused"


def test_resume_runs_a_paused_vm_again(running_vm, manager):
    vm = running_vm()
    client = manager(vm)
    _operate(client, vm, "suspend")

    job = _operate(client, vm, "resume")

    assert job["state"] == "succeeded"
    assert _vm(client, vm)["status"] == "up"
    assert _reported(vm.host_id, vm) == "running"


def test_start_on_a_paused_vm_resumes_it_where_it_is(running_vm, manager, settings):
    settings.CORRAL_TRANSITION_TIMEOUT = 15  # a start that waits in vain fails soon
    vm = running_vm()
    client = manager(vm)
    _operate(client, vm, "suspend")

    job = _operate(client, vm, "start")

    assert (job["state"], job["error"]) == ("succeeded", None)
    shown = _vm(client, vm)
    assert (shown["status"], shown["host"]) == ("up", vm.host_id)
    assert _reported(vm.host_id, vm) == "running"


# -- migrate ------------------------------------------------------------------------------------


def test_migrate_moves_the_running_domain_to_another_host_with_the_same_uuid(
    running_vm, admin_user, client_for
):
    vm = running_vm()
    source = vm.host_id

    job = _operate(client_for(admin_user), vm, "migrate")

    vm.refresh_from_db()
    assert job["state"] == "succeeded"
    assert vm.host_id not in (None, source)
    assert (vm.status, vm.migrating_to) == ("up", None)
    assert _reported(vm.host_id, vm) == "running"
    assert _reported(source, vm) is None


def test_migrate_to_a_chosen_host_lands_there(running_vm, sim_hosts, admin_user, client_for):
    vm = running_vm()
    destination = next(h for h in sim_hosts if h.pk != vm.host_id)

    job = _operate(client_for(admin_user), vm, "migrate", {"host": destination.pk})

    vm.refresh_from_db()
    assert job["result"]["to"] == destination.name
    assert vm.host_id == destination.pk
    assert _reported(destination.pk, vm) == "running"


def test_after_a_migration_the_console_never_leads_to_the_screen_port_of_the_old_host(
    running_vm, make_user, grant, client_for, admin_user
):
    vm = running_vm()
    # The guest-info loop read its screen on the old host; the new one shows none (test driver).
    VirtualMachine.objects.filter(pk=vm.pk).update(graphics_port=5901)
    user = make_user()
    grant(user, "UserRole", vm)
    _operate(client_for(admin_user), vm, "migrate")

    api = client_for(user).post(f"/api/vms/{vm.pk}/console/")
    portal = signed_in(user).post(f"/vms/{vm.pk}/console/", follow=True).content.decode()

    assert api.status_code == 409
    assert "has no screen Corral knows of yet" in api.json()["detail"]
    assert "has no screen Corral knows of yet" in portal
    assert not ConsoleTicket.objects.filter(vm=vm).exists()


def test_migrating_keeps_a_paused_vm_paused(running_vm, admin_user, client_for):
    vm = running_vm()
    client = client_for(admin_user)
    _operate(client, vm, "suspend")

    _operate(client, vm, "migrate")

    vm.refresh_from_db()
    assert vm.status == "paused"
    assert _reported(vm.host_id, vm) == "paused"


def test_migrating_to_the_host_it_is_on_is_a_400(running_vm, admin_user, client_for):
    vm = running_vm()

    response = client_for(admin_user).post(
        f"/api/vms/{vm.pk}/migrate/", {"host": vm.host_id}, format="json"
    )

    assert response.status_code == 400
    assert "host" in response.json()
    assert not Job.objects.filter(vm=vm, kind=JobKind.MIGRATE).exists()


# -- refusals -----------------------------------------------------------------------------------

# Nothing runs here, so the faster rolled-back transaction will do.
refusal = pytest.mark.django_db


@refusal
@pytest.mark.parametrize(
    ("status", "operation"),
    [("up", "start"), ("down", "suspend"), ("down", "shutdown"), ("up", "resume")],
)
def test_an_operation_the_vm_cannot_do_from_its_status_is_a_409(
    make_vm, admin_user, client_for, status, operation
):
    vm = make_vm(status=status)

    response = client_for(admin_user).post(f"/api/vms/{vm.pk}/{operation}/")

    assert response.status_code == 409
    assert vm.name in response.json()["detail"]
    assert not Job.objects.filter(vm=vm).exists()


@refusal
def test_a_user_who_may_only_view_the_vm_gets_403_on_start(
    make_vm, make_user, make_role, grant, client_for
):
    vm = make_vm()
    viewer = make_user()
    make_role("VmViewer", ["hosts.view_virtualmachine"])
    grant(viewer, "VmViewer", vm)

    response = client_for(viewer).post(f"/api/vms/{vm.pk}/start/")

    assert response.status_code == 403
    assert not Job.objects.filter(vm=vm).exists()


@refusal
def test_a_user_who_may_operate_but_not_migrate_gets_403_on_migrate(
    make_vm, make_user, grant, client_for
):
    vm = make_vm(status="up")
    user = make_user()
    grant(user, "UserRole", vm)

    response = client_for(user).post(f"/api/vms/{vm.pk}/migrate/", {}, format="json")

    assert response.status_code == 403
    assert not Job.objects.filter(vm=vm).exists()


@refusal
def test_a_user_who_cannot_see_the_vm_gets_404(make_vm, make_user, grant, client_for):
    vm = make_vm()
    stranger = make_user()
    grant(stranger, "UserVmManager", make_vm())

    response = client_for(stranger).post(f"/api/vms/{vm.pk}/start/")

    assert response.status_code == 404
    assert not Job.objects.filter(vm=vm).exists()


# -- placement under concurrency ------------------------------------------------------------------


def test_concurrent_starts_never_overcommit_a_host(sim_cluster, sim_hosts, make_vm, make_template):
    """Eight 1 GiB VMs start at once on two 3 GiB hosts: six run, two find no host."""
    Host.objects.filter(pk=sim_hosts[2].pk).update(status="maintenance")
    template = make_template(memory_mb=1024)
    vms = [make_vm(cluster=sim_cluster, template=template) for _ in range(8)]
    submitted = [jobs.submit(JobKind.START, vm=vm) for vm in vms]
    barrier = threading.Barrier(len(submitted))

    def start(job_id):
        close_old_connections()
        try:
            barrier.wait()
            jobs.run(job_id, OPERATION_BY_KIND)
        finally:
            connection.close()

    threads = [threading.Thread(target=start, args=(job.pk,)) for job in submitted]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    outcomes = sorted(
        Job.objects.filter(pk__in=[j.pk for j in submitted]).values_list("state", "error_code")
    )
    assert outcomes == [("failed", "no_host")] * 2 + [("succeeded", "")] * 6
    for host in sim_hosts[:2]:
        running = [
            vm
            for vm in VirtualMachine.objects.filter(host=host)
            if driver.domain_power_state(host.uri, str(vm.uuid)) == "running"
        ]
        assert len(running) == 3
        assert sum(vm.memory_mb for vm in running) <= host.memory_mb


def test_concurrent_placement_decisions_never_promise_a_host_more_memory_than_it_has(
    sim_cluster, sim_hosts, make_vm, make_template
):
    """Sixteen threads place 512 MiB VMs at once on two 3 GiB hosts, each deciding under the
    cluster's scheduling lock and recording its choice as a start does."""
    Host.objects.filter(pk=sim_hosts[2].pk).update(status="maintenance")
    template = make_template(memory_mb=512)
    vms = [make_vm(cluster=sim_cluster, template=template) for _ in range(16)]
    barrier = threading.Barrier(len(vms))
    refused = []

    def start_placing(vm):
        close_old_connections()
        try:
            barrier.wait()
            with decision(vm.cluster_id):
                chosen = place(vm)
                VirtualMachine.objects.filter(pk=vm.pk).update(status="starting", host=chosen.host)
        except NoHostAvailable:
            refused.append(vm.pk)
        finally:
            connection.close()

    threads = [threading.Thread(target=start_placing, args=(vm,)) for vm in vms]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert len(refused) == 4
    for host in sim_hosts[:2]:
        promised = VirtualMachine.objects.filter(host=host).values_list("memory_mb", flat=True)
        assert sum(promised) == 3072

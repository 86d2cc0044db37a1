"""A VM's snapshots through the API on simulated hosts: take (with or without memory), list,
revert, delete, each a job on the VM's queue; who may; bad input and refusals that change
nothing; the quota; migration and a pool's return; deleting the VM."""

import pytest

from hosts import driver, jobs
from hosts.models import Job, JobKind, JobState, Quota, VirtualMachine, VmSnapshot
from hosts.operations import OPERATION_BY_KIND
from tests.hosts.fixtures import run_pending_jobs

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def holder(make_user, grant):
    """vm -> its user (UserRole on it: may operate it), as a pool's holder is."""

    def make(vm):
        user = make_user()
        grant(user, "UserRole", vm)
        VirtualMachine.objects.filter(pk=vm.pk).update(owner=user)
        return user

    return make


def take(client, vm, **body) -> dict:
    response = client.post(f"/api/vms/{vm.pk}/snapshots/", body, format="json")
    assert response.status_code == 202, response.json()
    return response.json()


def run(job_id: int) -> Job:
    jobs.run(job_id, OPERATION_BY_KIND)
    return Job.objects.get(pk=job_id)


def state_of(vm) -> str | None:
    vm.refresh_from_db()
    return driver.domain_power_state(vm.host.uri, str(vm.uuid))


def test_a_memory_snapshot_brings_a_running_vm_back_running(running_vm, holder, client_for):
    vm = running_vm()
    client = client_for(holder(vm))

    taken = take(client, vm, name="before-upgrade", description="known good", memory=True)
    job = run(taken["job"]["id"])
    listed = client.get(f"/api/vms/{vm.pk}/snapshots/").json()
    client.post(f"/api/vms/{vm.pk}/poweroff/")
    run_pending_jobs()
    revert = client.post(f"/api/vms/{vm.pk}/snapshots/{taken['snapshot']['id']}/revert/")
    reverted = run(revert.json()["id"])

    assert taken["snapshot"]["status"] == "taking" and taken["job"]["kind"] == "snapshot"
    assert job.state == JobState.SUCCEEDED, job.error_message
    assert [
        (s["name"], s["description"], s["memory"], s["status"], s["current"]) for s in listed
    ] == [("before-upgrade", "known good", True, "ready", True)]
    assert revert.status_code == 202
    assert reverted.state == JobState.SUCCEEDED, reverted.error_message
    assert state_of(vm) == "running"
    assert client.get(f"/api/vms/{vm.pk}/").json()["status"] == "up"


def test_a_disk_only_snapshot_leaves_the_vm_shut_off_on_revert(running_vm, holder, client_for):
    vm = running_vm()
    client = client_for(holder(vm))
    taken = take(client, vm, name="disk-only")
    run(taken["job"]["id"])

    revert = client.post(f"/api/vms/{vm.pk}/snapshots/{taken['snapshot']['id']}/revert/")
    reverted = run(revert.json()["id"])

    assert reverted.state == JobState.SUCCEEDED, reverted.error_message
    assert state_of(vm) == "shutoff"
    assert client.get(f"/api/vms/{vm.pk}/").json()["status"] == "down"


def test_delete_removes_it_from_the_host_and_the_list(running_vm, holder, client_for):
    vm = running_vm()
    client = client_for(holder(vm))
    taken = take(client, vm, name="one")
    run(taken["job"]["id"])
    sid = taken["snapshot"]["id"]
    name = VmSnapshot.objects.get(pk=sid).libvirt_name

    response = client.delete(f"/api/vms/{vm.pk}/snapshots/{sid}/")
    shown_meanwhile = client.get(f"/api/vms/{vm.pk}/snapshots/{sid}/").json()["status"]
    job = run(response.json()["id"])

    assert response.status_code == 202 and response.json()["kind"] == "snapshot_delete"
    assert shown_meanwhile == "deleting"
    assert job.state == JobState.SUCCEEDED, job.error_message
    assert client.get(f"/api/vms/{vm.pk}/snapshots/").json() == []
    assert not driver.has_snapshot(vm.host.uri, str(vm.uuid), name)


def test_someone_who_may_not_operate_the_vm_finds_no_snapshots(
    running_vm, holder, make_user, client_for
):
    vm = running_vm()
    taken = take(client_for(holder(vm)), vm, name="mine")
    stranger = client_for(make_user())

    for response in (
        stranger.get(f"/api/vms/{vm.pk}/snapshots/"),
        stranger.post(f"/api/vms/{vm.pk}/snapshots/", {"name": "x"}, format="json"),
        stranger.get(f"/api/vms/{vm.pk}/snapshots/{taken['snapshot']['id']}/"),
        stranger.post(f"/api/vms/{vm.pk}/snapshots/{taken['snapshot']['id']}/revert/"),
    ):
        assert response.status_code == 404
    assert VmSnapshot.objects.count() == 1


def test_bad_input_is_a_field_message_and_makes_nothing(running_vm, holder, client_for):
    vm = running_vm()
    client = client_for(holder(vm))
    take(client, vm, name="taken")

    bad_name = client.post(f"/api/vms/{vm.pk}/snapshots/", {"name": "a b/c"}, format="json")
    twice = client.post(f"/api/vms/{vm.pk}/snapshots/", {"name": "taken"}, format="json")
    nameless = client.post(f"/api/vms/{vm.pk}/snapshots/", {}, format="json")

    assert bad_name.status_code == 400 and list(bad_name.json()) == ["name"]
    assert twice.status_code == 400
    assert twice.json() == {"name": [f"VM {vm.name} has a snapshot named taken already."]}
    assert nameless.status_code == 400 and nameless.json()["name"]
    assert VmSnapshot.objects.count() == 1
    assert Job.objects.filter(kind=JobKind.SNAPSHOT).count() == 1


def test_a_stopped_vm_has_no_memory_to_save(sim_vm, running_vm, holder, client_for):
    vm = running_vm()
    client = client_for(holder(vm))
    client.post(f"/api/vms/{vm.pk}/poweroff/")
    run_pending_jobs()
    never_started = sim_vm()
    other = client_for(holder(never_started))

    with_memory = client.post(
        f"/api/vms/{vm.pk}/snapshots/", {"name": "m", "memory": True}, format="json"
    )
    no_disk = other.post(f"/api/vms/{never_started.pk}/snapshots/", {"name": "d"}, format="json")

    assert with_memory.status_code == 400
    assert with_memory.json()["memory"][0].startswith(f"VM {vm.name} is Down: only a running")
    assert no_disk.status_code == 409
    assert no_disk.json() == {
        "detail": f"VM {never_started.name} has never been started: it has no disk to snapshot yet."
    }
    assert VmSnapshot.objects.count() == 0


def test_a_snapshot_counts_against_its_holders_quota(running_vm, holder, client_for):
    vm = running_vm()
    user = holder(vm)
    Quota.objects.create(snapshots=1)  # everyone's
    client = client_for(user)
    take(client, vm, name="first")

    second = client.post(f"/api/vms/{vm.pk}/snapshots/", {"name": "second"}, format="json")
    quota = client.get("/api/me/quota/").json()

    assert second.status_code == 409
    assert second.json()["detail"] == (
        "Quota exceeded for snapshots: requested 1, but already used 1 of 1."
    )
    assert quota["snapshots"] == {"limit": 1, "used": 1}
    assert quota["disk_gb"]["used"] == 2 * vm.disk_gb  # the VM's disk, and the snapshot's
    assert VmSnapshot.objects.count() == 1


def test_a_vm_with_snapshots_does_not_migrate(running_vm, holder, make_user, grant, client_for):
    vm = running_vm()
    taken = take(client_for(holder(vm)), vm, name="pinned")
    run(taken["job"]["id"])
    admin = make_user(superuser=True)

    response = client_for(admin).post(f"/api/vms/{vm.pk}/migrate/", {}, format="json")
    queued = jobs.submit(JobKind.MIGRATE, vm=vm)  # as the balancer or maintenance would
    ran = run(queued.pk)

    assert response.status_code == 409
    assert response.json() == {
        "detail": f"VM {vm.name} has 1 snapshot, kept in its disk on its host; a VM with "
        "snapshots does not move. Delete them to migrate it."
    }
    assert ran.state == JobState.FAILED and ran.error_code == "has_snapshots"
    vm.refresh_from_db()
    assert state_of(vm) == "running"


def test_deleting_the_vm_deletes_its_snapshots(running_vm, holder, make_user, client_for):
    vm = running_vm()
    client = client_for(holder(vm))
    run(take(client, vm, name="gone-with-it")["job"]["id"])
    client.post(f"/api/vms/{vm.pk}/poweroff/")
    run_pending_jobs()

    response = client_for(make_user(superuser=True)).delete(f"/api/vms/{vm.pk}/")
    run_pending_jobs()

    assert response.status_code == 202
    assert not VirtualMachine.objects.filter(pk=vm.pk).exists()
    assert VmSnapshot.objects.count() == 0


# -- pools ---------------------------------------------------------------------------------


def _in_pool(vm, make_pool, **pool_fields):
    pool = make_pool(cluster=vm.cluster, template=vm.template, size=1, **pool_fields)
    VirtualMachine.objects.filter(pk=vm.pk).update(pool=pool, pool_index=1)
    vm.refresh_from_db()
    return pool


def test_returning_a_vm_to_its_pool_drops_its_holders_snapshots(
    running_vm, holder, make_pool, client_for
):
    vm = running_vm()
    _in_pool(vm, make_pool, stateless=False)
    client = client_for(holder(vm))
    run(take(client, vm, name="mine")["job"]["id"])
    name = VmSnapshot.objects.get().libvirt_name

    response = client.post(f"/api/vms/{vm.pk}/return/")
    ran = run_pending_jobs()

    assert response.status_code == 202
    assert [job["kind"] for job in response.json()][0] == "snapshot_delete"
    assert JobKind.SNAPSHOT_DELETE in [job.kind for job in ran]
    assert VmSnapshot.objects.count() == 0
    assert not driver.has_snapshot(vm.host.uri, str(vm.uuid), name)


def test_a_stateless_pools_vm_takes_no_snapshots(running_vm, holder, make_pool, client_for):
    vm = running_vm()
    _in_pool(vm, make_pool, stateless=True)
    client = client_for(holder(vm))

    response = client.post(f"/api/vms/{vm.pk}/snapshots/", {"name": "nope"}, format="json")

    assert response.status_code == 409
    assert response.json() == {
        "detail": f"VM {vm.name} is in a stateless pool: it goes back to its base when it is "
        "given back, so it takes no snapshots."
    }
    assert VmSnapshot.objects.count() == 0

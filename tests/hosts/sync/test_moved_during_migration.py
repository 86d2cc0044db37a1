"""A VM moved outside Corral to a third host while a Corral migration runs is followed to
where it really runs (its domain found by UUID on any host of its cluster), never taken for
Down, and its pool does not take it back; on the real task cluster, three simulated hosts."""

import pytest

from hosts import driver, sync
from hosts.models import Job, JobKind, VirtualMachine
from project.models import Event, EventKind
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_vm_moved_to_a_third_host_during_a_migration_is_followed_there(
    running_vm,
    sim_hosts,
    make_pool,
    small_template,
    make_user,
    hooks_dir,
    tmp_path,
    task_cluster,
    admin_user,
    client_for,
):
    flag = tmp_path / "release"
    hooks_dir("vm-post-migrate", "50-hold", f"while [ ! -e {flag} ]; do sleep 0.05; done")
    pool = make_pool(cluster=sim_hosts[0].cluster, template=small_template)
    user = make_user()
    vm = running_vm(pool=pool, owner=user)
    source = vm.host
    task_cluster(CORRAL_HOOKS_DIR=hooks_dir.folder, CORRAL_HOOK_TIMEOUT="30")
    client = client_for(admin_user)
    job_id = client.post(f"/api/vms/{vm.pk}/migrate/").json()["id"]
    wait_until(lambda: Job.objects.get(pk=job_id).step == "Running vm-post-migrate hooks")
    destination = VirtualMachine.objects.get(pk=vm.pk).host
    third = next(h for h in sim_hosts if h.pk not in (source.pk, destination.pk))

    driver.migrate(destination.uri, third.uri, str(vm.uuid))  # outside Corral
    wait_until(lambda: VirtualMachine.objects.get(pk=vm.pk).power_host_id == third.pk)
    flag.touch()
    wait_until(lambda: Job.objects.get(pk=job_id).finished_at is not None, timeout=30)

    shown = client.get(f"/api/vms/{vm.pk}/").json()
    assert (shown["status"], shown["host"]) == ("up", third.pk)
    assert VirtualMachine.objects.get(pk=vm.pk).owner_id == user.pk  # not taken back
    assert not Job.objects.filter(vm=vm, kind=JobKind.REVERT).exists()
    assert driver.domain_power_state(third.uri, str(vm.uuid)) == "running"
    alerts = Event.objects.filter(kind=EventKind.ALERT, object_type="vm", object_id=vm.pk)
    assert any(
        f"running on {third.name}" in a and "moved outside Corral" in a
        for a in alerts.values_list("message", flat=True)
    )
    for host in sim_hosts:  # later reports agree
        sync.sync_host(host.pk)
    after = VirtualMachine.objects.get(pk=vm.pk)
    assert (after.status, after.host_id, after.owner_id) == ("up", third.pk, user.pk)

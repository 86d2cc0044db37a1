"""Logging in to a real VM by SSH with one's own key, the moment one takes it: the tiny guest
(a real SSH server, dropbear) runs on a real QEMU host whose guests' SSH ports are published on
this machine's loopback; keys go in and out through the QEMU guest agent, without a reboot.

One prestarted VM of a pool that keeps its disk: the first user takes it and logs in with their
key within seconds; they add a second key and it works too; they return it and their keys are
refused while the VM runs on; a second user takes it and logs in with theirs. Jobs run in this
process, as a task worker would run them; the client is the system's own ``ssh``.
"""

import pytest
from django.test import Client

from hosts import driver
from hosts.models import JobKind, VirtualMachine
from lab import tinyguest
from pools import monitor
from pools.models import VmPool
from tests.conftest import unique
from tests.hosts.driver.guests import login, ssh_key
from tests.hosts.fixtures import run_pending_jobs
from tests.hosts.images.uploads import tiny_guest_template

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_a_user_logs_in_by_ssh_to_the_prestarted_vm_they_take_and_loses_it_when_they_return_it(
    ssh_lab_host, tiny_guest, image_store, admin_user, make_user, grant, client_for, tmp_path
):
    admin = client_for(admin_user)
    template = tiny_guest_template(admin, tiny_guest)
    pool = admin.post(
        "/api/vmpools/",
        {
            "name": unique("pool"),
            "cluster": ssh_lab_host.cluster_id,
            "template": template["id"],
            "size": 1,
            "prestarted_vms": 1,
            "stateless": False,
        },
        format="json",
    )
    assert pool.status_code == 201, pool.content
    pool_id = pool.json()["id"]
    run_pending_jobs()
    assert monitor.run_for_pool(pool_id) == 1
    # Started with nobody's keys; the keys job waits for the agent, so the guest is up after it.
    assert [job.kind for job in run_pending_jobs()] == [JobKind.START, JobKind.GUEST_KEYS]

    alice, bob = make_user(), make_user()
    for user in (alice, bob):
        grant(user, "UserRole", VmPool.objects.get(pk=pool_id))
    alice_key, alice_public = ssh_key(tmp_path, "alice")
    bob_key, bob_public = ssh_key(tmp_path, "bob")
    added = client_for(alice).post(
        "/api/me/sshkeys/", {"name": "laptop", "public_key": alice_public}, format="json"
    )
    assert added.status_code == 201, added.content
    client_for(bob).post(
        "/api/me/sshkeys/", {"name": "laptop", "public_key": bob_public}, format="json"
    )

    # Alice takes it: it runs already, and her key works at once, without a reboot.
    taken = client_for(alice).post(f"/api/vmpools/{pool_id}/allocatevm/")
    assert taken.status_code == 200, taken.content
    assert taken.json()["instant"] is True
    vm_id = taken.json()["vm"]["id"]
    assert [job.kind for job in run_pending_jobs()] == [JobKind.GUEST_KEYS]
    shown = client_for(alice).get(f"/api/vms/{vm_id}/").json()
    details = shown["ssh"]
    assert details["user"] == tinyguest.LOGIN_USER
    assert details["command"] == f"ssh -p {details['port']} corral@127.0.0.1"
    assert shown["guest_keys"]["state"] == "in_guest"
    logged_in = login(alice_key, details, "hostname")
    vm = VirtualMachine.objects.get(pk=vm_id)
    assert (logged_in.returncode, logged_in.stdout.strip()) == (0, vm.name), logged_in.stderr
    assert login(bob_key, details, "hostname").returncode == 255  # not his VM

    # A key Alice adds while she holds it follows her there.
    second_key, second_public = ssh_key(tmp_path, "alice-desktop")
    browser = Client()
    browser.force_login(alice)
    client_for(alice).post(
        "/api/me/sshkeys/", {"name": "desktop", "public_key": second_public}, format="json"
    )
    assert [job.kind for job in run_pending_jobs()] == [JobKind.GUEST_KEYS]
    assert login(second_key, details, "hostname").returncode == 0
    page = browser.get(f"/vms/{vm_id}/").content.decode()
    assert details["command"] in page

    # She returns it: it runs on (the pool keeps disks), and her keys no longer open it.
    returned = client_for(alice).post(f"/api/vms/{vm_id}/return/")
    assert returned.status_code == 202, returned.content
    assert [job.kind for job in run_pending_jobs()] == [JobKind.GUEST_KEYS]
    assert driver.domain_power_state(ssh_lab_host.uri, str(vm.uuid)) == "running"
    for key in (alice_key, second_key):
        refused = login(key, details, "hostname")
        assert refused.returncode == 255
        assert "Permission denied" in refused.stderr

    # Bob takes it next and logs in with his own key.
    again = client_for(bob).post(f"/api/vmpools/{pool_id}/allocatevm/")
    assert again.json()["vm"]["id"] == vm_id
    run_pending_jobs()
    bobs = login(bob_key, client_for(bob).get(f"/api/vms/{vm_id}/").json()["ssh"], "id -un")
    assert (bobs.returncode, bobs.stdout.strip()) == (0, tinyguest.LOGIN_USER), bobs.stderr
    assert login(alice_key, details, "hostname").returncode == 255

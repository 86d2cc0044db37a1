"""A Nova server on a real QEMU host: made through the Compute API with a key name, it boots
the tiny guest, its console log (``os-getConsoleOutput``) shows the boot, and its user logs
in by SSH with the key the request named. Jobs run in this process, as a task worker would
run them."""

import time

import pytest

from hosts.guests import guestinfo
from hosts.models import VirtualMachine
from lab import tinyguest
from tests.conftest import unique
from tests.hosts.driver.guests import login, ssh_key
from tests.hosts.fixtures import run_pending_jobs
from tests.hosts.images.uploads import tiny_guest_template

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
V = "/compute/v2.1"


def test_a_server_boots_on_qemu_shows_its_console_log_and_takes_its_key(
    ssh_lab_host,
    tiny_guest,
    image_store,
    admin_user,
    make_user,
    grant,
    client_for,
    nova_for,
    tmp_path,
):
    admin = client_for(admin_user)
    flavor = unique("tiny")
    tiny_guest_template(admin, tiny_guest, name=flavor, cluster=ssh_lab_host.cluster_id)
    user = make_user()
    grant(user, "PowerUser", ssh_lab_host.cluster)
    key, public = ssh_key(tmp_path, "laptop")
    nova = nova_for(user)
    added = client_for(user).post(
        "/api/me/sshkeys/", {"name": "laptop", "public_key": public}, format="json"
    )
    assert added.status_code == 201, added.content

    created = nova.post(
        f"{V}/servers",
        {"server": {"name": "first boot", "flavorRef": flavor, "key_name": "laptop"}},
        format="json",
    )
    assert created.status_code == 202, created.content
    server_id = created.json()["server"]["id"]
    # Started, then its user's keys put in through the agent, as after every start.
    assert [job.kind for job in run_pending_jobs()] == ["start", "guest_keys"]

    deadline, output = time.monotonic() + 120, ""
    while "corral-guest: booted" not in output and time.monotonic() < deadline:
        guestinfo.refresh_host(ssh_lab_host.pk)
        action = nova.post(
            f"{V}/servers/{server_id}/action", {"os-getConsoleOutput": {}}, format="json"
        )
        output = action.json()["output"]
        time.sleep(0.5)
    assert "corral-guest: booted" in output, output[-2000:]
    shown = nova.get(f"{V}/servers/{server_id}").json()["server"]
    assert (shown["status"], shown["key_name"]) == ("ACTIVE", "laptop")

    vm = VirtualMachine.objects.get(uuid=server_id)
    details = client_for(user).get(f"/api/vms/{vm.pk}/").json()
    logged_in = login(key, details["ssh"], "id -un")
    assert (logged_in.returncode, logged_in.stdout.strip()) == (0, tinyguest.LOGIN_USER), (
        logged_in.stderr,
        output[-1500:],
    )

"""The Debian cloud image (lab/cloudimage.py) booted cold on a real QEMU host, as a user's VM
made through Corral's API: the image a real user brings, so this is the test that says Corral
works for them.

The admin uploads the image, makes a template of it (login account ``debian``, guest agent,
user-data with a command) and a VM of it, adds their SSH key and starts the VM. Real cloud-init
reads Corral's NoCloud seed (the VM's name as hostname, the owner's key, the template's
command); the host publishes the guest's SSH port on its loopback, and the system's ``ssh``
logs in where the API's ``ssh`` says. A key added later reaches the running guest through its
agent. One boot serves every test; it takes a minute or more under TCG.
"""

import time

import pytest

from hosts.models import JobKind, VirtualMachine
from lab import cloudimage
from tests.conftest import unique, wait_until
from tests.hosts.driver.guests import login, ssh_key
from tests.hosts.fixtures import run_pending_jobs
from tests.hosts.images.uploads import upload_file

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

RUNCMD_FILE = "/var/tmp/corral-runcmd"
# Cold boot to SSH took 54-73 s under TCG on 2 idle cores; a loaded machine takes longer.
SSH_TIMEOUT_S = 420
CLOUD_FINAL_TIMEOUT_S = 180


@pytest.fixture(scope="module")
def cloud_image():
    try:
        return cloudimage.build()
    except cloudimage.MirrorUnreachable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def ssh_keys(tmp_path_factory):
    """Two fresh ed25519 key pairs: ``{"seed": path, "agent": path}`` (private key files)."""
    folder = tmp_path_factory.mktemp("ssh")
    return {name: ssh_key(folder, name)[0] for name in ("seed", "agent")}


def test_a_vm_of_the_debian_cloud_image_boots_cold_on_corrals_seed_and_lets_its_owner_in(
    ssh_lab_host, cloud_image, ssh_keys, image_store, admin_user, client_for, settings
):
    # The keys job after the start waits for the guest agent, which a cold boot under TCG on
    # a loaded machine brings up later than the default wait for a booted guest's (90 s).
    settings.CORRAL_GUEST_KEYS_WAIT = SSH_TIMEOUT_S
    admin = client_for(admin_user)
    host = ssh_lab_host
    template = admin.post(
        "/api/templates/",
        {
            "name": unique("debian"),
            "vcpus": 2,
            "memory_mb": cloudimage.MEMORY_MIB,
            "disk_gb": 2,
            "disk_image": upload_file(admin, cloud_image.disk, "disk")["id"],
            "kernel_image": upload_file(admin, cloud_image.kernel, "kernel")["id"],
            "initrd_image": upload_file(admin, cloud_image.initrd, "initrd")["id"],
            "kernel_cmdline": cloudimage.KERNEL_CMDLINE,
            "guest_agent": True,
            "login_user": cloudimage.LOGIN_USER,
            "user_data": f"#cloud-config\nruncmd:\n  - echo ran-by-cloud-init > {RUNCMD_FILE}",
        },
        format="json",
    )
    assert template.status_code == 201, template.content
    public = ssh_keys["seed"].with_suffix(".pub").read_text().strip()
    added = admin.post("/api/me/sshkeys/", {"name": "seed", "public_key": public}, format="json")
    assert added.status_code == 201, added.content
    made = admin.post(
        "/api/vms/",
        {"name": unique("cloud"), "cluster": host.cluster_id, "template": template.json()["id"]},
        format="json",
    )
    assert made.status_code == 201, made.content
    vm = VirtualMachine.objects.get(pk=made.json()["id"])
    # Cold: the start job writes the seed, defines and starts the domain; the keys job
    # after it waits a while for the agent.
    started = time.monotonic()
    assert admin.post(f"/api/vms/{vm.pk}/start/").status_code == 202
    assert [job.kind for job in run_pending_jobs()] == [JobKind.START, JobKind.GUEST_KEYS]
    details = admin.get(f"/api/vms/{vm.pk}/").json()["ssh"]
    assert details["user"] == "debian"
    attempts = []

    def logged_in():
        done = login(ssh_keys["seed"], details, "true")
        attempts.append(done.stderr.strip())
        return done.returncode == 0

    wait_until(
        logged_in,
        timeout=SSH_TIMEOUT_S,
        interval=2,
        message=lambda: f"No SSH login within {SSH_TIMEOUT_S} s; last: {attempts[-1:]}",
    )
    seconds = time.monotonic() - started
    host.refresh_from_db()
    print(f"\ncloud image ({host.domain_type}): start to first SSH login in {seconds:.1f} s")

    # Real cloud-init took Corral's seed: the VM's name, the owner's key, the template's
    # command (which runs in cloud-init's last stage, maybe after sshd has started).
    named = login(ssh_keys["seed"], details, "hostname")
    assert (named.returncode, named.stdout.strip()) == (0, vm.name), named.stderr

    def ran():
        done = login(ssh_keys["seed"], details, f"cat {RUNCMD_FILE} 2>/dev/null || true")
        return done.stdout.strip()

    assert wait_until(ran, timeout=CLOUD_FINAL_TIMEOUT_S, interval=2) == "ran-by-cloud-init"

    # A key the owner adds reaches the running guest through its agent, without a reboot.
    other = ssh_keys["agent"].with_suffix(".pub").read_text().strip()
    added = admin.post("/api/me/sshkeys/", {"name": "other", "public_key": other}, format="json")
    assert added.status_code == 201, added.content
    assert [job.kind for job in run_pending_jobs()] == [JobKind.GUEST_KEYS]
    assert login(ssh_keys["agent"], details, "true").returncode == 0
    assert admin.get(f"/api/vms/{vm.pk}/").json()["guest_keys"]["state"] == "in_guest"

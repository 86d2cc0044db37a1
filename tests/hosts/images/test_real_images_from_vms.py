"""An image made from a real VM on a real QEMU host: its holder writes a file in the running
tiny guest (through its guest agent, as root), makes an image of the VM through the API (a
live copy, the guest's filesystems frozen through the agent so what it wrote is on the disk),
and a new VM booted from that image finds the file, on a disk that counted the first VM's
boot. The new VM, stopped, makes an image too (its volume cloned on the host)."""

import base64
import json
import secrets

import libvirt
import libvirt_qemu
import pytest

from hosts import driver, jobs
from hosts.models import Host, Image, Job, JobState, Template, VirtualMachine
from hosts.operations import OPERATION_BY_KIND
from tests.conftest import unique, wait_until
from tests.hosts.images.uploads import upload_file

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
AGENT_TIMEOUT_S = 10
MARKER_PATH = "/mnt/state/marker"


@pytest.fixture
def agent_template(qemu_host, tiny_guest, admin_user, client_for, image_store):
    """The tiny guest, with its agent, offered in the host's cluster (images uploaded)."""
    client = client_for(admin_user)
    response = client.post(
        "/api/templates/",
        {
            "name": unique("tiny"),
            "cluster": qemu_host.cluster_id,
            "vcpus": 1,
            "memory_mb": 128,
            "disk_gb": 1,
            "kernel_image": upload_file(client, tiny_guest.kernel, "kernel")["id"],
            "initrd_image": upload_file(client, tiny_guest.initrd, "initrd")["id"],
            "disk_image": upload_file(client, tiny_guest.disk, "disk")["id"],
            "kernel_cmdline": "console=ttyS0 quiet",
            "graphics": "none",
            "guest_agent": True,
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _run(job_id: int) -> Job:
    jobs.run(job_id, OPERATION_BY_KIND)
    job = Job.objects.get(pk=job_id)
    assert job.state == JobState.SUCCEEDED, (job.kind, job.error_code, job.error_message)
    return job


def _booted(vm: VirtualMachine, line: str) -> None:
    """Wait until the guest printed ``line`` and said it is up."""

    def shown() -> bool:
        out = driver.recent_output(vm.host.uri, str(vm.uuid), "corral", 64 * 1024)
        return line.encode() in out and b"corral-guest: booted" in out

    wait_until(shown, timeout=90, interval=0.5, message=f"{vm.name} never printed {line!r}")


def _agent(vm: VirtualMachine, command: str, **arguments):
    """What the guest agent answers ``command``, asked through libvirt."""
    conn = libvirt.open(vm.host.uri)
    try:
        dom = conn.lookupByUUIDString(str(vm.uuid))
        asked = json.dumps({"execute": command, "arguments": arguments})
        return json.loads(libvirt_qemu.qemuAgentCommand(dom, asked, AGENT_TIMEOUT_S, 0))["return"]
    finally:
        conn.close()


def _write(vm: VirtualMachine, path: str, text: str) -> None:
    handle = _agent(vm, "guest-file-open", path=path, mode="w")
    encoded = base64.b64encode(text.encode()).decode()
    _agent(vm, "guest-file-write", handle=handle, **{"buf-b64": encoded})
    _agent(vm, "guest-file-close", handle=handle)


def _read(vm: VirtualMachine, path: str) -> str:
    handle = _agent(vm, "guest-file-open", path=path, mode="r")
    data = _agent(vm, "guest-file-read", handle=handle, count=4096)
    _agent(vm, "guest-file-close", handle=handle)
    return base64.b64decode(data["buf-b64"]).decode()


def _started(make_vm, qemu_host, template_id, owner, **fields) -> VirtualMachine:
    template = Template.objects.get(pk=template_id)
    vm = make_vm(cluster=qemu_host.cluster, template=template, owner=owner, **fields)
    _run(jobs.submit("start", vm=vm).pk)
    vm.refresh_from_db()
    return vm


def test_a_vm_booted_from_an_image_of_a_running_vm_finds_what_its_guest_wrote(
    qemu_host, agent_template, make_user, make_vm, grant, client_for
):
    user = make_user()
    first = _started(make_vm, qemu_host, agent_template, user)
    grant(user, "UserVmManager", first)
    client = client_for(user)
    _booted(first, "corral-guest: boot 1")
    marker = f"written before the image {secrets.token_hex(8)}"
    _write(first, MARKER_PATH, marker)  # in the guest's page cache: only a freeze flushes it

    answer = client.post(f"/api/vms/{first.pk}/image/", {"name": unique("snap")}, format="json")

    assert answer.status_code == 202, answer.content
    job = _run(answer.json()["id"])
    assert (job.result["live"], job.result["stopped_for_copy"]) == (True, False)
    image = Image.objects.get(pk=answer.json()["image"]["id"])
    assert (image.status, image.format, image.owner_id) == ("ready", "qcow2", user.pk)
    assert driver.domain_power_state(qemu_host.uri, str(first.uuid)) == "running"

    second = _started(make_vm, qemu_host, agent_template, user, disk_image=image)
    _booted(second, "corral-guest: boot 2")  # its disk counted the first VM's boot

    assert _read(second, MARKER_PATH) == marker

    _run(jobs.submit("poweroff", vm=second).pk)
    grant(user, "UserVmManager", second)
    cold = client.post(f"/api/vms/{second.pk}/image/", {"name": unique("cold")}, format="json")
    assert cold.status_code == 202, cold.content
    job = _run(cold.json()["id"])
    assert (job.result["live"], job.result["stopped_for_copy"]) == (False, False)
    assert Image.objects.get(pk=cold.json()["image"]["id"]).status == "ready"
    assert driver.domain_power_state(qemu_host.uri, str(second.uuid)) == "shutoff"
    assert str(second.uuid) + "-export.qcow2" not in volumes_of(qemu_host)


def volumes_of(host: Host) -> set[str]:
    conn = libvirt.open(host.uri)
    try:
        pool = conn.storagePoolLookupByName("corral")
        pool.refresh(0)
        return set(pool.listVolumes())
    finally:
        conn.close()

"""Snapshots of a real guest (the tiny guest on a real QEMU host), through the API, as their
user sees them: a memory snapshot brings the guest back running where it was (a shell's
variable set before it, changed after it, reads as before); a disk-only snapshot brings the
disk back (the guest counts its boots on its disk: after a reboot and a revert, the next boot
counts from the snapshot's count again) and leaves the VM shut off. Jobs run in this process, as
a task worker would run them.
"""

import re
import secrets
import string

import libvirt
import pytest

from hosts import driver
from hosts.models import VirtualMachine
from tests.conftest import unique, wait_until
from tests.hosts.driver.guests import type_on_keyboard
from tests.hosts.fixtures import run_pending_jobs
from tests.hosts.images.uploads import tiny_guest_template

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
LOG_BYTES = 256 * 1024


def _console(vm) -> str:
    host = vm.host
    return driver.recent_output(host.uri, str(vm.uuid), host.storage_pool, LOG_BYTES).decode(
        errors="replace"
    )


def _shows(vm, pattern: str, count: int = 1) -> str:
    """Wait until the VM's console shows ``pattern`` ``count`` times; the console."""

    def seen():
        text = _console(vm)
        return text if len(re.findall(pattern, text)) >= count else None

    return wait_until(
        seen,
        timeout=120,
        interval=0.5,
        message=lambda: f"never {count}x {pattern!r}; the console:\n{_console(vm)[-3000:]}",
    )


def _value_of_m(vm, domain, tag: str, set_to: str = "") -> str:
    """What the guest's shell holds in ``M`` (set to ``set_to`` first, on the same line),
    asked on its keyboard and written on its serial console as ``<tag> <value>``: typed again
    while no answer shows (keys typed while a guest is loading its state, or before its
    screen's shell has started, can be lost)."""
    assignment = f"M={set_to}; " if set_to else ""
    for _attempt in range(4):
        type_on_keyboard(domain, f"{assignment}echo mval{tag} $M >/dev/ttyS0\n")
        try:
            console = wait_until(
                lambda: (found := re.search(rf"mval{tag} ([a-z]+)", _console(vm))) and found,
                timeout=15,
                interval=0.5,
            )
        except AssertionError:
            continue
        return console[1]
    raise AssertionError(f"the guest never answered {tag}; its console:\n{_console(vm)[-3000:]}")


def _word() -> str:
    return "".join(secrets.choice(string.ascii_lowercase) for _ in range(10))


def test_a_real_guest_goes_back_to_its_snapshots_with_and_without_memory(
    ssh_lab_host, tiny_guest, image_store, make_user, grant, client_for
):
    admin = client_for(make_user(superuser=True))
    template = tiny_guest_template(admin, tiny_guest)
    user = make_user()
    made = admin.post(
        "/api/vms/",
        {"name": unique("snap"), "cluster": ssh_lab_host.cluster_id, "template": template["id"]},
        format="json",
    )
    assert made.status_code == 201, made.content
    vm_id = made.json()["id"]
    vm = VirtualMachine.objects.get(pk=vm_id)
    grant(user, "UserVmManager", vm)
    client = client_for(user)

    def operate(path: str, body: dict | None = None):
        response = client.post(f"/api/vms/{vm_id}/{path}", body or {}, format="json")
        assert response.status_code == 202, response.content
        run_pending_jobs()
        vm.refresh_from_db()
        return response.json()

    def snapshot(name: str, memory: bool) -> int:
        return operate("snapshots/", {"name": name, "memory": memory})["snapshot"]["id"]

    operate("start/")
    _shows(vm, r"corral-guest: booted")
    assert "boot 1" in _console(vm)
    domain = libvirt.open(vm.host.uri).lookupByUUIDString(str(vm.uuid))

    # With memory: the guest's shell comes back as it was.
    kept, changed = _word(), _word()
    assert _value_of_m(vm, domain, "before", set_to=kept) == kept
    with_memory = snapshot("with-memory", memory=True)
    assert _value_of_m(vm, domain, "changed", set_to=changed) == changed
    operate(f"snapshots/{with_memory}/revert/")
    assert driver.domain_power_state(vm.host.uri, str(vm.uuid)) == "running"
    assert vm.status == "up"
    assert _value_of_m(vm, domain, "after") == kept
    assert _console(vm).count("corral-guest: booted") == 1  # resumed, not booted again

    # Disk only: the disk comes back (its boot count with it), the VM shut off.
    disk_only = snapshot("after-boot-one", memory=False)
    operate("poweroff/")
    operate("start/")
    _shows(vm, r"boot 2\b")
    operate(f"snapshots/{disk_only}/revert/")
    assert driver.domain_power_state(vm.host.uri, str(vm.uuid)) == "shutoff"
    assert vm.status == "down"
    operate("start/")
    console = _shows(vm, r"boot 2\b", count=2)
    assert "boot 3" not in console

    listed = client.get(f"/api/vms/{vm_id}/snapshots/").json()
    assert [(s["name"], s["memory"], s["current"]) for s in listed] == [
        ("with-memory", True, False),
        ("after-boot-one", False, True),
    ]
    assert all(s["size_bytes"] > 0 for s in listed)

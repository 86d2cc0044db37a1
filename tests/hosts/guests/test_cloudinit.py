"""cloud-init seeds on a real QEMU host: the ISO Corral uploads to the VM's host names the VM
and carries its current user's SSH keys; once the VM changes hands, the guest-info loop
rewrites it."""

import email
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText

import pytest

from hosts.driver.libvirt import guests
from hosts.guests import cloudinit, guestinfo
from hosts.models import Host
from pools.services import allocate_vm, return_vm
from project import sshkeys
from tests.project.sshkeys_data import ECDSA, ED25519, RSA


@pytest.fixture
def qemu_host(qemu_daemons, make_cluster):
    daemon = qemu_daemons[0]
    return Host.objects.create(name="qemu-seed", cluster=make_cluster(), uri=daemon.uri)


def seed_on_host(vm) -> dict[str, str]:
    data = guests.read_volume(vm.host.uri, guests.seed_volume(str(vm.uuid)))
    assert data is not None, "no seed on the host"
    assert data[32808 : 32808 + 6] == b"cidata"  # the volume label NoCloud looks for
    return cloudinit.read_seed(data)


def test_the_seed_follows_the_vm_from_one_user_to_the_next(
    qemu_host, make_user, make_pool, make_vm, make_template, django_capture_on_commit_callbacks
):
    template = make_template(user_data="#cloud-config\npackages: [htop]\n")
    pool = make_pool(cluster=qemu_host.cluster, template=template, stateless=False)
    vm = make_vm(
        cluster=qemu_host.cluster, template=template, pool=pool, host=qemu_host, status="up"
    )
    alice, bob = make_user("alice"), make_user("bob")
    sshkeys.add_key(alice, "laptop", ED25519)
    sshkeys.add_key(alice, "desktop", RSA)
    sshkeys.add_key(bob, "work", ECDSA)
    try:
        assert cloudinit.write_seed(vm)  # as the VM's start wrote it: nobody's keys
        unclaimed = seed_on_host(vm)
        with django_capture_on_commit_callbacks(execute=True):
            allocate_vm(pool, alice)
        guestinfo.refresh_host(qemu_host.pk)
        first = seed_on_host(vm)

        with django_capture_on_commit_callbacks(execute=True):
            return_vm(vm, requested_by=alice)
            allocate_vm(pool, bob)
        guestinfo.refresh_host(qemu_host.pk)
        second = seed_on_host(vm)
    finally:
        guests.remove_guest_files(qemu_host.uri, str(vm.uuid))

    assert "ssh_authorized_keys: []" in unclaimed["user-data"]
    assert first["meta-data"] == f'instance-id: {vm.uuid}\nlocal-hostname: "{vm.name}"\n'
    assert first["user-data"].startswith("#cloud-config\n")
    assert "packages:\n- htop\n" in first["user-data"]
    assert ED25519 in first["user-data"] and RSA in first["user-data"]
    assert ECDSA not in first["user-data"]
    assert ECDSA in second["user-data"]
    assert ED25519 not in second["user-data"] and RSA not in second["user-data"]
    assert "htop" in second["user-data"]


def test_a_template_whose_user_data_is_not_a_cloud_config_mapping_is_refused(make_template):
    from django.core.exceptions import ValidationError

    for text in ("packages: [htop]", "#cloud-config\n- a list\n", "#cloud-config\nkey: [unclosed"):
        with pytest.raises(ValidationError) as refused:
            make_template(user_data=text).full_clean()
        assert "user_data" in refused.value.message_dict


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("own", "part_type"),
    [
        ("#!/bin/sh\necho hello > /tmp/hello\n", "text/x-shellscript"),
        ("#cloud-config\nruncmd: [[touch, /tmp/x]]\n", "text/cloud-config"),
        ("just some words\n", "text/plain"),
    ],
)
def test_a_vm_with_user_data_of_its_own_gets_it_beside_the_template_config_and_keys(
    make_user, make_vm, make_template, own, part_type
):
    template = make_template(user_data="#cloud-config\npackages: [htop]\n")
    alice = make_user("alice")
    sshkeys.add_key(alice, "laptop", ED25519)
    vm = make_vm(template=template, user_data=own)
    vm.owner = alice
    vm.save()

    message = email.message_from_string(cloudinit.user_data(vm))

    assert message.is_multipart()
    first, second = message.get_payload()
    assert first.get_content_type() == "text/cloud-config"
    config = first.get_payload(decode=True).decode()
    assert "packages:\n- htop\n" in config and ED25519 in config
    assert second.get_content_type() == part_type
    assert second.get_payload(decode=True).decode() == own


@pytest.mark.django_db
def test_a_multipart_user_data_keeps_each_of_its_parts(make_vm):
    own = MIMEMultipart()
    own.attach(MIMEText("#!/bin/sh\necho one\n", "x-shellscript"))
    own.attach(MIMEText("#cloud-config\nhostname: two\n", "cloud-config"))
    vm = make_vm(user_data=own.as_string())

    parts = email.message_from_string(cloudinit.user_data(vm)).get_payload()

    assert [part.get_content_type() for part in parts] == [
        "text/cloud-config",
        "text/x-shellscript",
        "text/cloud-config",
    ]
    assert parts[2].get_payload(decode=True).decode() == "#cloud-config\nhostname: two\n"


@pytest.mark.django_db
def test_a_vm_without_user_data_of_its_own_keeps_a_plain_cloud_config(make_vm, make_template):
    vm = make_vm(template=make_template(user_data="#cloud-config\npackages: [htop]\n"))

    assert cloudinit.user_data(vm).startswith("#cloud-config\npackages:\n- htop\n")

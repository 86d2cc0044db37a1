"""The demo administrator made by `make run`: a random password, printed once; the demo's lab:
the tiny guest's images in the image store, a template booting them and a pool of one."""

import hashlib
import re
from io import StringIO

from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command

from hosts import sync
from hosts.models import Host, Image, Job, JobKind, Template, VirtualMachine
from pools.models import VmPool


def run_demo_admin() -> str:
    out = StringIO()
    call_command("demo_admin", stdout=out)
    return out.getvalue()


def test_demo_admin_is_created_with_a_password_that_works(db):
    output = run_demo_admin()
    password = re.search(r"password: (\S+)", output).group(1)
    user = authenticate(username="admin", password=password)
    assert user is not None and user.is_superuser


def test_demo_admin_password_is_random_not_fixed(db):
    first = re.search(r"password: (\S+)", run_demo_admin()).group(1)
    get_user_model().objects.filter(username="admin").delete()
    second = re.search(r"password: (\S+)", run_demo_admin()).group(1)
    assert first != second
    assert len(first) >= 12


def test_demo_admin_prints_the_password_only_once(db):
    run_demo_admin()
    again = run_demo_admin()
    assert "password:" not in again
    assert "exists already" in again


def test_the_demo_with_a_lab_boots_the_tiny_guest_from_uploaded_images_and_reuses_them(
    db, qemu_daemons, tiny_guest, image_store, make_cluster
):
    lab = make_cluster(name="lab")
    host = Host.objects.create(name="qemu-1", cluster=lab, uri=qemu_daemons[0].uri)
    sync.sync_host(host.pk)

    call_command("seed_demo", "--cluster", "demo", "--lab", "lab", stdout=StringIO())

    template = Template.objects.get(name="tiny-qemu")
    assert (template.graphics, template.guest_agent) == ("vnc", True)
    assert "console=ttyS0" in template.kernel_cmdline
    stored = {
        image.kind: (image.size_bytes, image.sha256)
        for image in (template.kernel_image, template.initrd_image, template.disk_image)
    }
    assert stored["kernel"][0] == tiny_guest.kernel.stat().st_size
    assert stored["disk"][1] == hashlib.sha256(tiny_guest.disk.read_bytes()).hexdigest()
    assert template.disk_image.format == "qcow2"
    assert all((image_store / image.file).exists() for image in Image.objects.all())
    pool = VmPool.objects.get(name="lab-pool")
    assert (pool.cluster, pool.template, pool.size, pool.prestarted_vms) == (lab, template, 1, 1)
    assert list(pool.vms.values_list("name", flat=True)) == ["lab-pool-1"]
    assert Job.objects.filter(kind=JobKind.COPY_IMAGE, host=host).count() == 3

    again = StringIO()
    call_command("seed_demo", "--cluster", "demo", "--lab", "lab", stdout=again)

    assert "tiny-qemu" in again.getvalue()
    assert Image.objects.count() == 3
    assert VmPool.objects.filter(cluster=lab).count() == 1
    assert VirtualMachine.objects.filter(cluster=lab).count() == 1
    assert sorted(p.name for p in image_store.iterdir() if not p.name.startswith(".")) == sorted(
        Image.objects.values_list("file", flat=True)
    )


def test_the_demo_without_a_lab_makes_no_real_guest(db):
    out = StringIO()

    call_command("seed_demo", "--cluster", "demo", stdout=out)

    assert "no lab cluster" in out.getvalue()
    assert not Template.objects.filter(name="tiny-qemu").exists()
    assert not VmPool.objects.filter(name="lab-pool").exists()


def test_the_demo_pools_vms_are_named_after_it(db):
    call_command("seed_demo", "--cluster", "demo", stdout=StringIO())

    pool = VmPool.objects.get(name="demo-pool")
    assert sorted(pool.vms.values_list("name", flat=True)) == [
        "demo-pool-1",
        "demo-pool-2",
        "demo-pool-3",
        "demo-pool-4",
    ]

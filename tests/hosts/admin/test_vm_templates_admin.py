"""Making a template from a VM in the admin console: the VM's page links to a form naming the
image and the template; one job makes both (the template with the VM's CPUs, memory and disk
and its template's boot fields and agent), and the page shows that job."""

from __future__ import annotations

import pytest

from hosts import jobs
from hosts.models import Image, Job, JobKind, JobState, Template
from hosts.operations import OPERATION_BY_KIND
from tests.project.admin.fixtures import admin_url, logged_in, shown_messages

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def vm(running_vm, small_template, make_image):
    """A running VM of 2 vCPUs whose template boots a kernel with the guest agent."""
    kernel = make_image(name="vmlinuz", kind="kernel", content=b"k" * 1024)
    template = Template.objects.filter(pk=small_template.pk)
    template.update(kernel_image=kernel, kernel_cmdline="console=ttyS0", guest_agent=True)
    running = running_vm(vcpus=2)
    template.update(login_user="debian")  # after its start: no keys job to wait for
    return running


def _form(vm) -> str:
    return admin_url("hosts.VirtualMachine", "make_template", vm.pk)


def test_the_vms_page_links_to_the_form_and_one_job_makes_the_image_and_the_template(
    vm, admin_user
):
    console = logged_in(admin_user)
    page = console.get(admin_url("hosts.VirtualMachine", "change", vm.pk))
    assert _form(vm) in page.content.decode()
    form = console.get(_form(vm))
    assert form.status_code == 200
    assert f'value="{vm.name}-image"' in form.content.decode()

    posted = console.post(_form(vm), {"image_name": "web-golden", "template_name": "web-v2"})

    job = Job.objects.get(kind=JobKind.IMAGE_FROM_VM)
    assert posted.status_code == 302
    assert posted["Location"] == admin_url("hosts.Job", "change", job.pk)
    shown = console.get(posted["Location"])
    assert (
        "success",
        f"Job #{job.pk} makes image web-golden of VM {vm.name}, then template web-v2 from it.",
    ) in shown_messages(shown)
    image = Image.objects.get(name="web-golden")
    assert (image.status, image.visibility, image.owner) == ("saving", "public", admin_user)

    jobs.run(job.pk, OPERATION_BY_KIND)

    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED, job.error_message
    made = Template.objects.get(name="web-v2")
    image.refresh_from_db()
    assert (made.disk_image, image.status) == (image, "ready")
    assert (made.vcpus, made.memory_mb, made.disk_gb) == (2, vm.memory_mb, vm.disk_gb)
    assert (made.kernel_image.name, made.kernel_cmdline) == ("vmlinuz", "console=ttyS0")
    assert (made.guest_agent, made.login_user, made.cluster) == (True, "debian", None)
    assert job.result["template"] == "web-v2"


def test_a_taken_name_is_shown_on_its_field_and_nothing_is_queued(vm, admin_user, make_image):
    make_image(name="taken")

    posted = logged_in(admin_user).post(_form(vm), {"image_name": "taken", "template_name": "t"})

    assert posted.status_code == 200
    assert "An image with this name exists already." in posted.content.decode()
    assert not Job.objects.filter(kind=JobKind.IMAGE_FROM_VM).exists()
    assert sorted(Image.objects.values_list("name", flat=True)) == ["taken", "vmlinuz"]


def test_who_may_not_make_templates_gets_no_link_and_no_job(
    vm, make_user, grant, make_role, cluster_b
):
    operator = make_user("operator", is_staff=True)
    grant(operator, make_role("VmOperator", ["hosts.view_virtualmachine",
                                             "hosts.operate_virtualmachine"]).name, vm)  # fmt: skip
    outsider = make_user("outsider", is_staff=True)
    grant(outsider, "ClusterAdmin", cluster_b)
    console = logged_in(operator)

    page = console.get(admin_url("hosts.VirtualMachine", "change", vm.pk))
    refused = console.post(_form(vm), {"image_name": "mine", "template_name": "mine"})

    assert page.status_code == 200 and _form(vm) not in page.content.decode()
    assert refused.status_code == 302
    assert ("error", f"You may not make a template from VM {vm.name}.") in shown_messages(
        console.get(refused["Location"])
    )
    assert logged_in(outsider).get(_form(vm)).status_code == 404
    assert list(Image.objects.values_list("name", flat=True)) == ["vmlinuz"]
    assert not Job.objects.filter(kind=JobKind.IMAGE_FROM_VM).exists()

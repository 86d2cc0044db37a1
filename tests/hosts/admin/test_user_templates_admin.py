"""Users' own templates in the admin console: the admins of their cluster list and open them
(with their owner); other users do not find them, in the template list or as a choice for a new
VM or pool; a new VM of a template whose image its maker no longer sees is a form error."""

from __future__ import annotations

import pytest

from hosts.models import ImageMember, VirtualMachine
from tests.project.admin.fixtures import admin_url, form_errors, logged_in, page_form

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(make_user, grant, cluster_a):
    """A staff user who may create VMs in cluster A (PowerUser there)."""
    user = make_user("alice", is_staff=True)
    grant(user, "PowerUser", cluster_a)
    return user


@pytest.fixture
def bobs_template(make_user, make_template, cluster_a):
    bob = make_user("bob")
    return make_template("bobs", cluster=cluster_a, owner=bob, visibility="private")


def test_the_clusters_admin_lists_and_opens_users_templates_with_their_owner(
    console_of_a, bobs_template
):
    listed = console_of_a.get(admin_url("hosts.Template", "changelist"))
    opened = console_of_a.get(admin_url("hosts.Template", "change", bobs_template.pk))

    assert "bobs" in listed.content.decode()
    assert opened.status_code == 200
    assert ">bob<" in opened.content.decode()  # its owner, shown read-only


def test_another_user_finds_no_users_template_in_the_console(alice, bobs_template, make_template):
    make_template("admins", cluster=None)
    console = logged_in(alice)

    listed = console.get(admin_url("hosts.Template", "changelist")).content.decode()
    opened = console.get(admin_url("hosts.Template", "change", bobs_template.pk))

    assert "admins" in listed and "bobs" not in listed
    assert opened.status_code == 302  # "doesn't exist", as for any object one may not see


def _errors_on(response, field: str) -> list[str]:
    form_errors(response)  # the page was shown again, with errors
    return response.context["adminform"].form.errors.get(field, [])


def _new_vm(console, cluster, template) -> dict:
    url = admin_url("hosts.VirtualMachine", "add")
    return {
        **page_form(console, url),
        "name": "new-vm",
        "cluster": cluster.pk,
        "template": template.pk,
        "vcpus": 1,
        "memory_mb": 256,
        "disk_gb": 1,
    }


def test_another_users_template_is_no_choice_for_a_new_vm_or_pool(
    console_of_a, alice, bobs_template, cluster_a
):
    console = logged_in(alice)
    url = admin_url("hosts.VirtualMachine", "add")

    response = console.post(url, _new_vm(console, cluster_a, bobs_template))

    assert "Select a valid choice" in str(_errors_on(response, "template"))
    assert not VirtualMachine.objects.exists()
    pool_url = admin_url("pools.VmPool", "add")
    pool_form = console_of_a.get(pool_url).content.decode()
    assert "bobs" in pool_form  # the cluster's admin may make a pool of it


def test_a_new_vm_of_a_template_whose_image_is_no_longer_shared_is_a_form_error(
    alice, make_user, make_image, make_template, cluster_a
):
    owner = make_user("carol")
    disk = make_image(owner=owner, visibility="shared", name="carols-disk")
    ImageMember.objects.create(image=disk, user=alice, status="accepted")
    mine = make_template(
        "mine", cluster=cluster_a, owner=alice, visibility="private", disk_image=disk, disk_gb=1
    )
    ImageMember.objects.filter(image=disk).delete()
    console = logged_in(alice)

    response = console.post(
        admin_url("hosts.VirtualMachine", "add"), _new_vm(console, cluster_a, mine)
    )

    assert _errors_on(response, "template") == [
        "Template mine boots from an image you may not see (its owner no longer shares it with "
        "you): no VM can be made from it until they do."
    ]
    assert not VirtualMachine.objects.exists()


def test_the_users_delete_confirmation_says_what_becomes_of_their_templates(
    superuser_console, make_user, make_template, make_vm, cluster_a
):
    carol = make_user("carol")
    make_template("unused-t", cluster=cluster_a, owner=carol, visibility="private")
    used = make_template("used-t", cluster=cluster_a, owner=carol, visibility="private")
    make_vm(cluster_a, used)

    page = superuser_console.get(admin_url("auth.User", "delete", carol.pk)).content.decode()

    assert "carol: Their templates no VM or pool uses are deleted: unused-t." in page
    assert (
        "carol: Their templates in use are kept, handed to the admins (no owner, private): used-t."
    ) in page

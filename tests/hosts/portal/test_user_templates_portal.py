"""The portal's templates of one's own: "Make a template" of a disk image under My images (in a
cluster where the user may create VMs), the list of their templates there, and deleting one;
through Django's test client on the real database."""

from __future__ import annotations

import pytest

from hosts.models import Image, Template
from tests.conftest import unique
from tests.portal import messages_of, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster(make_cluster):
    return make_cluster("lab")


@pytest.fixture
def alice(make_user, grant, cluster):
    user = make_user("alice")
    grant(user, "PowerUser", cluster)
    return user


@pytest.fixture
def disk(make_image, alice):
    return make_image(owner=alice, visibility="private", name="alices-disk")


def form(cluster, **changes) -> dict:
    data = {"name": "alices-t", "cluster": cluster.pk, "vcpus": 2, "memory_mb": 512, "disk_gb": 1}
    data.update(changes)
    return data


def test_my_images_offers_to_make_a_template_of_a_disk_image(alice, disk, make_image):
    kernel = make_image(kind="kernel", owner=alice, visibility="private", name="alices-kernel")

    page = signed_in(alice).get("/images/").content.decode()

    assert f'href="/images/{disk.pk}/template/"' in page
    assert f'href="/images/{kernel.pk}/template/"' not in page
    assert 'id="my-templates"' in page and "No templates of your own yet." in page


def test_the_form_offers_the_clusters_where_the_user_may_create_vms(
    alice, disk, make_cluster, make_host, cluster
):
    make_cluster("not-hers")
    make_host(cluster, networks=["lab-net"])

    page = signed_in(alice).get(f"/images/{disk.pk}/template/").content.decode()

    assert 'id="template-form"' in page
    assert ">lab</option>" in page and "not-hers" not in page
    assert 'value="lab-net"' in page


def test_making_a_template_makes_the_users_own_and_lists_it(alice, disk, cluster):
    client = signed_in(alice)

    response = client.post(f"/images/{disk.pk}/template/", form(cluster), follow=True)

    template = Template.objects.get()
    assert (template.name, template.owner, template.visibility) == ("alices-t", alice, "private")
    assert (template.cluster, template.disk_image, template.vcpus) == (cluster, disk, 2)
    assert messages_of(response) == ["Template alices-t made: your VMs may be made from it."]
    assert f'<tr id="template-{template.pk}">' in response.content.decode()


def test_a_cluster_admin_makes_a_template_of_their_own_here_too(
    make_user, grant, cluster, make_image
):
    admin = make_user("lab-admin")
    grant(admin, "ClusterAdmin", cluster)
    image = make_image(owner=admin, visibility="private")

    signed_in(admin).post(f"/images/{image.pk}/template/", form(cluster))

    assert Template.objects.get().owner == admin


def test_the_apis_refusal_is_shown_on_its_field_and_nothing_is_made(
    alice, disk, cluster, make_template
):
    make_template("taken")
    client = signed_in(alice)
    Image.objects.filter(pk=disk.pk).update(virtual_size_bytes=3 * 1024**3)

    small_disk = client.post(f"/images/{disk.pk}/template/", form(cluster, disk_gb=1))
    taken = client.post(f"/images/{disk.pk}/template/", form(cluster, name="taken", disk_gb=3))

    assert small_disk.status_code == 400
    assert '<div class="field field-error" id="field-disk_gb">' in small_disk.content.decode()
    assert "the disk must be at least that big" in small_disk.content.decode()
    assert '<div class="field field-error" id="field-name">' in taken.content.decode()
    assert Template.objects.count() == 1


def test_another_users_private_image_has_no_template_page(alice, make_user, make_image, cluster):
    bobs = make_image(owner=make_user("bob"), visibility="private")
    client = signed_in(alice)

    assert client.get(f"/images/{bobs.pk}/template/").status_code == 404
    assert client.post(f"/images/{bobs.pk}/template/", form(cluster)).status_code == 404
    assert not Template.objects.exists()


def test_a_user_who_may_create_no_vms_is_told_so(make_user, make_image):
    loner = make_user("loner")
    image = make_image(owner=loner, visibility="private")

    page = signed_in(loner).get(f"/images/{image.pk}/template/").content.decode()

    assert 'id="no-template-cluster"' in page and 'id="template-form"' not in page


def test_deleting_a_template_deletes_it_unless_vms_are_made_from_it(
    alice, cluster, make_template, make_vm
):
    unused = make_template("unused", cluster=cluster, owner=alice, visibility="private")
    used = make_template("used", cluster=cluster, owner=alice, visibility="private")
    make_vm(cluster, used, name=unique("vm"))
    client = signed_in(alice)

    deleted = client.post(f"/templates/{unused.pk}/delete/", follow=True)
    kept = client.post(f"/templates/{used.pk}/delete/", follow=True)

    assert messages_of(deleted) == ["Template unused deleted."]
    assert messages_of(kept) == [
        "Template used is in use (VMs or pools are made from it): it is kept."
    ]
    assert list(Template.objects.values_list("name", flat=True)) == ["used"]


def test_another_users_template_is_not_found_for_deleting(alice, make_user, cluster, make_template):
    bobs = make_template("bobs", cluster=cluster, owner=make_user("bob"), visibility="private")
    admins = make_template("admins", cluster=cluster)
    client = signed_in(alice)

    assert client.post(f"/templates/{bobs.pk}/delete/").status_code == 404
    assert client.post(f"/templates/{admins.pk}/delete/").status_code == 404
    assert Template.objects.count() == 2

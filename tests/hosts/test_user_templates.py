"""Templates of users' own (hosts.template_access): whoever may create VMs in a cluster makes
templates there from images they may see; theirs are private to them and the cluster's admins;
VMs of them need the images still visible; deleting the owner hands those in use to the
admins."""

import pytest

from hosts.models import Image, ImageMember, Template, VirtualMachine
from project.admin.users import deletion_notes
from tests.conftest import unique


@pytest.fixture
def cluster(make_cluster):
    return make_cluster("lab")


@pytest.fixture
def creators(make_user, grant, cluster):
    """Two users who may create VMs in the cluster (PowerUser there)."""
    alice, bob = make_user("alice"), make_user("bob")
    for user in (alice, bob):
        grant(user, "PowerUser", cluster)
    return alice, bob


@pytest.fixture
def cluster_admin(make_user, grant, cluster):
    admin = make_user("lab-admin")
    grant(admin, "ClusterAdmin", cluster)
    return admin


def own_image(make_image, owner, **fields):
    return make_image(owner=owner, visibility="private", **fields)


def make_own(client, cluster, image=None, **fields):
    body = {"name": unique("own"), "cluster": cluster.pk, "disk_gb": 1, **fields}
    if image is not None:
        body["disk_image"] = image.pk
    return client.post("/api/templates/", body, format="json")


def new_vm(client, cluster, template):
    body = {"name": unique("vm"), "cluster": cluster.pk, "template": template}
    return client.post("/api/vms/", body, format="json")


# -- making one -----------------------------------------------------------------------------------


def test_who_may_create_vms_makes_a_private_template_of_their_own_image_there(
    creators, cluster, make_image, client_for
):
    alice, bob = creators
    image = own_image(make_image, alice)

    made = make_own(client_for(alice), cluster, image, name="alices")

    assert made.status_code == 201, made.content
    body = made.json()
    assert (body["owner"], body["owner_name"], body["visibility"]) == (
        alice.pk,
        "alice",
        "private",
    )
    assert body["disk_image"] == image.pk
    listed = client_for(alice).get("/api/templates/").json()["results"]
    assert [row["name"] for row in listed] == ["alices"]
    assert client_for(bob).get("/api/templates/").json()["results"] == []


def test_a_template_is_made_only_where_its_maker_may_create_vms(
    creators, cluster, make_cluster, make_role, grant, client_for
):
    alice, _bob = creators
    elsewhere = make_cluster("elsewhere")
    # alice sees the other cluster and its templates, and may not create VMs there.
    grant(alice, make_role("Looker", ["hosts.view_cluster", "hosts.view_template"]).name, elsewhere)

    refused = make_own(client_for(alice), elsewhere)

    assert refused.status_code == 403, refused.content
    assert refused.json() == {"detail": "You may not create a template in cluster elsewhere."}
    assert not Template.objects.exists()


def test_a_users_template_names_its_cluster_for_every_cluster_is_the_admins(
    creators, client_for, admin_user
):
    alice, _bob = creators

    refused = client_for(alice).post("/api/templates/", {"name": "anywhere"}, format="json")
    admins = client_for(admin_user).post("/api/templates/", {"name": "shared"}, format="json")

    assert refused.status_code == 400, refused.content
    assert refused.json() == {
        "cluster": [
            "A template of a user's own is offered in one cluster: choose it (templates for "
            "every cluster are the admins')."
        ]
    }
    assert admins.status_code == 201, admins.content
    assert (admins.json()["owner"], admins.json()["visibility"]) == (None, "public")


@pytest.mark.parametrize("field", ["disk_image", "kernel_image", "initrd_image"])
def test_an_image_the_maker_may_not_see_is_a_field_error_as_if_it_did_not_exist(
    field, creators, cluster, make_image, client_for
):
    alice, bob = creators
    kind = field.removesuffix("_image")
    bobs = own_image(make_image, bob, kind=kind)
    client = client_for(alice)

    hidden = make_own(client, cluster, **{field: bobs.pk})
    missing = make_own(client, cluster, **{field: bobs.pk + 1000})

    assert (hidden.status_code, missing.status_code) == (400, 400)
    assert hidden.json() == {field: [f'Invalid pk "{bobs.pk}" - object does not exist.']}
    assert missing.json() == {field: [f'Invalid pk "{bobs.pk + 1000}" - object does not exist.']}
    assert not Template.objects.exists()


def test_an_image_shared_with_the_maker_makes_their_template(
    creators, cluster, make_image, client_for
):
    alice, bob = creators
    shared = make_image(owner=bob, visibility="shared")
    ImageMember.objects.create(image=shared, user=alice, status="accepted")

    made = make_own(client_for(alice), cluster, shared)

    assert made.status_code == 201, made.content
    assert made.json()["owner"] == alice.pk


def test_a_cluster_admin_makes_the_admins_templates_everyone_there_uses(
    creators, cluster, cluster_admin, client_for
):
    _alice, bob = creators

    made = make_own(client_for(cluster_admin), cluster, name="for-all")

    assert made.status_code == 201, made.content
    assert (made.json()["owner"], made.json()["visibility"]) == (None, "public")
    assert client_for(bob).get(f"/api/templates/{made.json()['id']}/").status_code == 200


def test_a_users_template_is_private_and_puts_vms_only_on_networks_its_cluster_offers(
    creators, cluster, make_host, client_for
):
    alice, _bob = creators
    make_host(cluster, networks=["lab-net"])
    client = client_for(alice)
    template_id = make_own(client, cluster).json()["id"]

    public = client.patch(f"/api/templates/{template_id}/", {"visibility": "public"})
    bridged = client.patch(f"/api/templates/{template_id}/", {"bridge": "br0"})
    other_net = client.patch(
        f"/api/templates/{template_id}/", {"networks": ["mgmt"]}, format="json"
    )
    offered = client.patch(
        f"/api/templates/{template_id}/", {"networks": ["lab-net"]}, format="json"
    )

    assert public.json() == {
        "visibility": ["A user's template is private: only admins offer templates."]
    }
    assert bridged.json() == {"bridge": ["Only the admins' templates put VMs on a host bridge."]}
    assert other_net.json() == {
        "networks": ["The hosts of cluster lab offer no network mgmt; they offer lab-net."]
    }
    assert offered.status_code == 200, offered.content
    assert Template.objects.get(pk=template_id).networks == ["lab-net"]


# -- seeing, changing and deleting it -------------------------------------------------------------


def test_another_users_template_is_a_404_and_no_vm_is_made_of_it(creators, cluster, client_for):
    alice, bob = creators
    template_id = make_own(client_for(bob), cluster).json()["id"]
    client = client_for(alice)

    assert client.get(f"/api/templates/{template_id}/").status_code == 404
    assert client.patch(f"/api/templates/{template_id}/", {"vcpus": 2}).status_code == 404
    assert client.delete(f"/api/templates/{template_id}/").status_code == 404
    refused = new_vm(client, cluster, template_id)
    assert refused.status_code == 400, refused.content
    assert refused.json() == {"template": [f'Invalid pk "{template_id}" - object does not exist.']}
    assert Template.objects.filter(pk=template_id).exists()
    assert not VirtualMachine.objects.exists()


def test_the_owner_makes_vms_of_their_template_changes_it_and_may_not_delete_it_in_use(
    creators, cluster, client_for
):
    alice, _bob = creators
    client = client_for(alice)
    template_id = make_own(client, cluster).json()["id"]

    changed = client.patch(f"/api/templates/{template_id}/", {"vcpus": 2})
    vm = new_vm(client, cluster, template_id)
    in_use = client.delete(f"/api/templates/{template_id}/")

    assert changed.status_code == 200, changed.content
    assert vm.status_code == 201, vm.content
    assert (vm.json()["vcpus"], vm.json()["owner"]) == (2, "alice")
    assert in_use.status_code == 409, in_use.content
    assert Template.objects.filter(pk=template_id).exists()
    assert client.delete(f"/api/vms/{vm.json()['id']}/").status_code == 204
    assert client.delete(f"/api/templates/{template_id}/").status_code == 204
    assert not Template.objects.exists()


def test_the_owner_moves_their_template_only_where_they_may_create_vms(
    creators, cluster, make_cluster, make_role, grant, client_for
):
    alice, _bob = creators
    client = client_for(alice)
    template_id = make_own(client, cluster).json()["id"]
    other, looked_at = make_cluster("other"), make_cluster("looked-at")
    grant(alice, "PowerUser", other)
    grant(alice, make_role("Looker", ["hosts.view_cluster"]).name, looked_at)

    refused = client.patch(f"/api/templates/{template_id}/", {"cluster": looked_at.pk})
    moved = client.patch(f"/api/templates/{template_id}/", {"cluster": other.pk})

    assert refused.status_code == 403, refused.content
    assert refused.json() == {
        "detail": "You may not move your template to cluster looked-at: you may not create "
        "VMs there."
    }
    assert moved.status_code == 200, moved.content
    assert Template.objects.get(pk=template_id).cluster == other


def test_the_clusters_admins_see_and_manage_every_users_template_there(
    creators, cluster, cluster_admin, make_cluster, make_user, grant, client_for, admin_user
):
    alice, _bob = creators
    template_id = make_own(client_for(alice), cluster).json()["id"]
    admins_id = make_own(client_for(cluster_admin), cluster, name="admins").json()["id"]
    elsewhere_admin = make_user("elsewhere-admin")
    grant(elsewhere_admin, "ClusterAdmin", make_cluster("elsewhere"))
    admin = client_for(cluster_admin)

    listed = admin.get("/api/templates/").json()["results"]
    users = admin.get("/api/templates/", {"owner__isnull": "false"}).json()["results"]
    alices = admin.get("/api/templates/", {"owner": alice.pk}).json()["results"]
    changed = admin.patch(f"/api/templates/{template_id}/", {"description": "Checked."})

    assert {row["id"] for row in listed} == {template_id, admins_id}
    assert [row["id"] for row in users] == [row["id"] for row in alices] == [template_id]
    assert changed.status_code == 200, changed.content
    assert client_for(admin_user).get(f"/api/templates/{template_id}/").status_code == 200
    assert client_for(elsewhere_admin).get(f"/api/templates/{template_id}/").status_code == 404
    assert admin.delete(f"/api/templates/{template_id}/").status_code == 204


def test_a_power_user_may_not_change_the_admins_template(
    creators, cluster, make_template, client_for
):
    alice, _bob = creators
    admins = make_template("admins", cluster=cluster)

    refused = client_for(alice).patch(f"/api/templates/{admins.pk}/", {"vcpus": 4})

    assert refused.status_code == 403, refused.content
    assert Template.objects.get(pk=admins.pk).vcpus == 1


def test_the_template_list_takes_two_queries_however_many_users_templates_it_shows(
    creators, cluster, make_template, client_for, django_assert_max_num_queries
):
    alice, bob = creators
    client = client_for(alice)
    for owner in (alice, bob, None):
        visibility = "public" if owner is None else "private"
        make_template(unique("t"), cluster=cluster, owner=owner, visibility=visibility)

    with django_assert_max_num_queries(2):
        few = client.get("/api/templates/", {"limit": 1000}).json()["count"]
    for owner in (alice, bob, None) * 10:
        visibility = "public" if owner is None else "private"
        make_template(unique("t"), cluster=cluster, owner=owner, visibility=visibility)
    with django_assert_max_num_queries(2):
        many = client.get("/api/templates/", {"limit": 1000}).json()["count"]

    assert (few, many) == (2, 22)  # hers and the admins', never bob's


# -- its images must stay visible -----------------------------------------------------------------


def test_a_vm_of_a_template_whose_image_is_no_longer_shared_is_refused(
    creators, cluster, make_image, client_for
):
    alice, bob = creators
    shared = make_image(owner=bob, visibility="shared", name="bobs-disk")
    membership = ImageMember.objects.create(image=shared, user=alice, status="accepted")
    client = client_for(alice)
    template_id = make_own(client, cluster, shared, name="on-bobs").json()["id"]
    assert new_vm(client, cluster, template_id).status_code == 201

    membership.delete()
    refused = new_vm(client, cluster, template_id)

    assert refused.status_code == 400, refused.content
    assert refused.json() == {
        "template": [
            "Template on-bobs boots from an image you may not see (its owner no longer shares "
            "it with you): no VM can be made from it until they do."
        ]
    }
    assert VirtualMachine.objects.count() == 1


def test_a_vm_of_an_admins_template_boots_its_image_for_everyone_who_may_use_it(
    creators, cluster, make_image, make_template, client_for
):
    alice, _bob = creators
    kept = make_image(owner=None, visibility="private")  # as a deleted user's image in use
    template = make_template("admins", cluster=cluster, disk_image=kept, disk_gb=1)

    made = new_vm(client_for(alice), cluster, template.pk)

    assert made.status_code == 201, made.content


# -- deleting its owner ---------------------------------------------------------------------------


def test_deleting_a_user_deletes_their_unused_templates_and_hands_the_admins_those_in_use(
    creators, cluster, make_image, client_for, admin_user
):
    alice, bob = creators
    client = client_for(alice)
    only_unused = own_image(make_image, alice, name="only-unused")
    used_image = own_image(make_image, alice, name="used-image")
    unused = make_own(client, cluster, only_unused, name="unused-t").json()["id"]
    used = make_own(client, cluster, used_image, name="used-t").json()["id"]
    assert new_vm(client, cluster, used).status_code == 201

    notes = deletion_notes(alice)
    alice.delete()

    assert notes == [
        "Their templates no VM or pool uses are deleted: unused-t.",
        "Their templates in use are kept, handed to the admins (no owner, private): used-t.",
        "Their images no template or VM uses are deleted: only-unused.",
        "Their images in use are kept, handed to the admins (no owner, private): used-image.",
    ]
    assert not Template.objects.filter(pk=unused).exists()
    assert not Image.objects.filter(name="only-unused").exists()
    kept = Template.objects.get(pk=used)
    assert (kept.owner, kept.visibility) == (None, "private")
    assert client_for(bob).get(f"/api/templates/{used}/").status_code == 404
    assert client_for(admin_user).get(f"/api/templates/{used}/").status_code == 200


def test_an_image_owner_is_not_told_the_names_of_other_users_templates_that_keep_it(
    creators, cluster, make_image, client_for
):
    alice, bob = creators
    shared = make_image(owner=alice, visibility="shared", name="alices-disk")
    ImageMember.objects.create(image=shared, user=bob, status="accepted")
    make_own(client_for(bob), cluster, shared, name="bobs-secret")

    refused = client_for(alice).delete(f"/api/images/{shared.pk}/")

    assert refused.status_code == 409, refused.content
    assert refused.json() == {
        "detail": "Templates use this image: 1 template of other users; change them first."
    }
    assert Image.objects.filter(pk=shared.pk).exists()

"""Images of their own: who sees an image (private, shared with members who accept it, public,
community), who publishes it, and what deleting its owner does (hosts.image_access)."""

import pytest
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile

from hosts.models import Image, ImageMember, Quota


@pytest.fixture
def creators(make_user, grant, make_cluster, image_store):
    """Two users who may create VMs in one cluster (PowerUser there)."""
    cluster = make_cluster()
    alice, bob = make_user("alice"), make_user("bob")
    for user in (alice, bob):
        grant(user, "PowerUser", cluster)
    return cluster, alice, bob


def upload(client, name="own-disk", **fields):
    body = {"name": name, "kind": "disk", "file": SimpleUploadedFile("d", b"\0" * 512), **fields}
    return client.post("/api/images/", body, format="multipart")


def test_a_user_uploads_a_private_image_that_another_user_cannot_find_anywhere_in_the_api(
    creators, client_for
):
    cluster, alice, bob = creators
    created = upload(client_for(alice))
    assert created.status_code == 201, created.content
    image_id = created.json()["id"]
    assert (created.json()["owner"], created.json()["visibility"]) == (alice.pk, "private")

    other = client_for(bob)
    assert other.get(f"/api/images/{image_id}/").status_code == 404
    assert other.get("/api/images/").json()["results"] == []
    assert other.patch(f"/api/images/{image_id}/", {"name": "mine"}).status_code == 404
    assert other.delete(f"/api/images/{image_id}/").status_code == 404
    assert other.get(f"/api/images/{image_id}/members/").status_code == 404
    owner = client_for(alice)
    assert [row["id"] for row in owner.get("/api/images/").json()["results"]] == [image_id]


def test_a_template_names_only_an_image_its_author_may_see(
    creators, make_user, client_for, admin_user
):
    cluster, alice, _bob = creators
    image_id = upload(client_for(alice)).json()["id"]
    cluster_admin = make_user("cluster-admin")
    from project.access.grants import grant_role
    from project.models import Role

    grant_role(Role.objects.get(name="ClusterAdmin"), cluster, user=cluster_admin)
    body = {"name": "from-alices", "cluster": cluster.pk, "disk_image": image_id, "disk_gb": 1}

    refused = client_for(cluster_admin).post("/api/templates/", body, format="json")

    assert refused.status_code == 400, refused.content
    assert "disk_image" in refused.json()
    made = client_for(admin_user).post("/api/templates/", body, format="json")
    assert made.status_code == 201, made.content


def test_sharing_offers_the_image_and_lists_it_once_the_member_accepts(creators, client_for):
    _cluster, alice, bob = creators
    owner, member = client_for(alice), client_for(bob)
    image_id = upload(owner, visibility="shared").json()["id"]

    offered = owner.post(f"/api/images/{image_id}/members/", {"user": "bob"}, format="json")
    assert offered.status_code == 201, offered.content
    assert offered.json()["status"] == "pending"
    assert member.get(f"/api/images/{image_id}/").status_code == 200
    assert member.get("/api/images/").json()["results"] == []
    membership = offered.json()["id"]

    assert (
        owner.patch(
            f"/api/images/{image_id}/members/{membership}/", {"status": "accepted"}, format="json"
        ).status_code
        == 403
    )
    accepted = member.patch(
        f"/api/images/{image_id}/members/{membership}/", {"status": "accepted"}, format="json"
    )
    assert accepted.status_code == 200, accepted.content
    assert [row["id"] for row in member.get("/api/images/").json()["results"]] == [image_id]
    assert (
        member.post(
            f"/api/images/{image_id}/members/", {"user": "alice"}, format="json"
        ).status_code
        == 403
    )

    assert owner.delete(f"/api/images/{image_id}/members/{membership}/").status_code == 204
    assert member.get(f"/api/images/{image_id}/").status_code == 404


def test_a_group_member_sees_the_image_shared_with_its_group(creators, client_for):
    _cluster, alice, bob = creators
    group = Group.objects.create(name="lab")
    bob.groups.add(group)
    owner = client_for(alice)
    image_id = upload(owner, visibility="shared").json()["id"]

    offered = owner.post(f"/api/images/{image_id}/members/", {"group": "lab"}, format="json")

    assert offered.status_code == 201, offered.content
    assert client_for(bob).get(f"/api/images/{image_id}/").status_code == 200


def test_a_private_image_has_no_members(creators, client_for):
    _cluster, alice, _bob = creators
    owner = client_for(alice)
    image_id = upload(owner).json()["id"]

    refused = owner.post(f"/api/images/{image_id}/members/", {"user": "bob"}, format="json")

    assert refused.status_code == 409, refused.content
    assert not ImageMember.objects.exists()


def test_only_admins_publish_an_image(creators, client_for, admin_user):
    _cluster, alice, bob = creators
    owner = client_for(alice)
    assert upload(owner, name="public-at-once", visibility="public").status_code == 400
    image_id = upload(owner).json()["id"]

    refused = owner.patch(f"/api/images/{image_id}/", {"visibility": "public"}, format="json")
    assert refused.status_code == 400, refused.content
    assert "visibility" in refused.json()
    published = client_for(admin_user).patch(
        f"/api/images/{image_id}/", {"visibility": "public"}, format="json"
    )
    assert published.status_code == 200, published.content
    assert client_for(bob).get(f"/api/images/{image_id}/").status_code == 200
    assert (
        owner.patch(
            f"/api/images/{image_id}/", {"visibility": "private"}, format="json"
        ).status_code
        == 400
    )


def test_a_community_image_is_usable_by_all_but_listed_only_when_asked(creators, client_for):
    _cluster, alice, bob = creators
    image_id = upload(client_for(alice), visibility="community").json()["id"]
    other = client_for(bob)

    assert other.get(f"/api/images/{image_id}/").status_code == 200
    assert other.get("/api/images/").json()["results"] == []
    listed = other.get("/api/images/", {"visibility": "community"}).json()["results"]
    assert [row["id"] for row in listed] == [image_id]


def test_deleting_a_user_deletes_their_unused_images_and_hands_the_admins_those_in_use(
    creators, client_for, make_template, admin_user
):
    cluster, alice, _bob = creators
    owner = client_for(alice)
    unused = upload(owner, name="unused-disk").json()["id"]
    used = upload(owner, name="used-disk").json()["id"]
    make_template(name="keeps-it", disk_image=Image.objects.get(pk=used))
    from project.admin.users import deletion_notes

    notes = deletion_notes(alice)
    assert notes == [
        "Their images no template or VM uses are deleted: unused-disk.",
        "Their images in use are kept, handed to the admins (no owner, private): used-disk.",
    ]

    alice.delete()

    assert not Image.objects.filter(pk=unused).exists()
    kept = Image.objects.get(pk=used)
    assert (kept.owner, kept.visibility) == (None, "private")
    assert client_for(admin_user).get(f"/api/images/{used}/").status_code == 200


def test_my_images_lists_the_users_own_images_with_their_visibility_and_the_upload_form(
    creators, client_for
):
    from django.test import Client

    _cluster, alice, bob = creators
    upload(client_for(alice), name="alices-disk", visibility="community")
    upload(client_for(bob), name="bobs-disk")
    browser = Client()
    browser.force_login(alice)

    page = browser.get("/images/")

    assert page.status_code == 200
    html = page.content.decode()
    assert "alices-disk" in html and "community" in html
    assert "bobs-disk" not in html
    assert 'id="image-upload"' in html and "image_upload.js" in html


def test_uploads_count_against_the_uploaders_image_quota(creators, client_for):
    cluster, alice, bob = creators
    Quota.objects.create(images=1)  # the default for everyone: one image each
    assert upload(client_for(alice), name="first").status_code == 201

    refused = upload(client_for(alice), name="second")

    assert refused.status_code == 409, refused.content
    assert (refused.json()["code"], refused.json()["resource"]) == ("quota_exceeded", "images")
    assert (
        refused.json()["detail"]
        == "Quota exceeded for images: requested 1, but already used 1 of 1."
    )
    assert list(Image.objects.values_list("name", flat=True)) == ["first"]
    assert upload(client_for(bob), name="second").status_code == 201  # bob's own count

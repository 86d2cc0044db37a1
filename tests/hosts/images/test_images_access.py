"""Who may upload an image where: the add action on the image's cluster (or system-wide for
images shared by every cluster)."""

from django.core.files.uploadedfile import SimpleUploadedFile

from hosts.models import Image


def upload(client, cluster):
    body = {"name": "access-disk", "kind": "disk", "file": SimpleUploadedFile("d", b"\0" * 512)}
    if cluster is not None:
        body["cluster"] = cluster.pk
    return client.post("/api/images/", body, format="multipart")


def test_a_cluster_admin_uploads_an_image_into_their_cluster(
    make_user, grant, make_cluster, client_for, image_store
):
    cluster, user = make_cluster(), make_user()
    grant(user, "ClusterAdmin", cluster)

    response = upload(client_for(user), cluster)

    assert response.status_code == 201, response.content
    assert Image.objects.get(name="access-disk").cluster == cluster


def test_a_cluster_admin_uploads_an_image_for_every_cluster_only_as_their_own_private_one(
    make_user, grant, make_cluster, client_for, image_store
):
    user = make_user()
    grant(user, "ClusterAdmin", make_cluster())

    response = upload(client_for(user), None)

    assert response.status_code == 201, response.content
    image = Image.objects.get(name="access-disk")
    assert (image.owner, image.visibility) == (user, "private")


def test_a_power_user_uploads_a_private_image_into_the_cluster_they_create_vms_in(
    make_user, grant, make_cluster, client_for, image_store
):
    cluster, user = make_cluster(), make_user()
    grant(user, "PowerUser", cluster)

    response = upload(client_for(user), cluster)

    assert response.status_code == 201, response.content
    image = Image.objects.get(name="access-disk")
    assert (image.owner, image.visibility, image.cluster) == (user, "private", cluster)


def test_a_user_who_may_create_no_vm_may_not_upload(
    make_user, grant, make_cluster, client_for, image_store
):
    cluster, user = make_cluster(), make_user()
    grant(user, "UserRole", cluster)

    response = upload(client_for(user), None)

    assert response.status_code == 403, response.content
    assert not Image.objects.exists()
    assert not list(image_store.iterdir())


def test_a_cluster_the_caller_cannot_see_is_a_field_error(
    make_user, make_cluster, client_for, image_store
):
    response = upload(client_for(make_user()), make_cluster())

    assert response.status_code == 400, response.content
    assert "cluster" in response.json()
    assert not list(image_store.iterdir())

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


def test_a_cluster_admin_may_not_upload_an_image_shared_by_every_cluster(
    make_user, grant, make_cluster, client_for, image_store
):
    user = make_user()
    grant(user, "ClusterAdmin", make_cluster())

    response = upload(client_for(user), None)

    assert response.status_code == 403, response.content
    assert not Image.objects.exists()
    assert not list(image_store.iterdir())


def test_a_power_user_sees_the_cluster_but_may_not_upload(
    make_user, grant, make_cluster, client_for, image_store
):
    cluster, user = make_cluster(), make_user()
    grant(user, "PowerUser", cluster)

    response = upload(client_for(user), cluster)

    assert response.status_code == 403, response.content
    assert not Image.objects.exists()


def test_a_cluster_the_caller_cannot_see_is_a_field_error(
    make_user, make_cluster, client_for, image_store
):
    response = upload(client_for(make_user()), make_cluster())

    assert response.status_code == 400, response.content
    assert "cluster" in response.json()
    assert not list(image_store.iterdir())

"""Templates with no cluster are offered everywhere, but only system-wide admins change them."""


def test_a_cluster_admin_may_use_but_not_change_a_shared_template(
    make_user, make_cluster, make_template, grant, client_for
):
    admin = make_user()
    grant(admin, "ClusterAdmin", make_cluster())
    shared = make_template(name="shared-small")
    api = client_for(admin)

    assert api.get(f"/api/templates/{shared.pk}/").status_code == 200
    assert api.patch(f"/api/templates/{shared.pk}/", {"vcpus": 4}).status_code == 403
    assert api.delete(f"/api/templates/{shared.pk}/").status_code == 403
    shared.refresh_from_db()
    assert shared.vcpus == 1


def test_a_cluster_admin_may_not_create_a_shared_template(
    make_user, make_cluster, grant, client_for
):
    admin = make_user()
    cluster = make_cluster()
    grant(admin, "ClusterAdmin", cluster)
    api = client_for(admin)

    assert api.post("/api/templates/", {"name": "everywhere"}).status_code == 403
    assert api.post("/api/templates/", {"name": "mine", "cluster": cluster.pk}).status_code == 201


def test_a_system_admin_may_change_a_shared_template(make_user, make_template, grant, client_for):
    admin = make_user()
    grant(admin, "ClusterAdmin")
    shared = make_template()

    response = client_for(admin).patch(f"/api/templates/{shared.pk}/", {"vcpus": 4})

    assert response.status_code == 200
    assert response.json()["vcpus"] == 4

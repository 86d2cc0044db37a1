"""Errors point at what to fix, and never reveal objects the caller may not see."""

from rest_framework.test import APIClient


def test_a_duplicate_vm_name_in_a_cluster_is_reported_on_the_name_field(
    admin_user, client_for, make_vm
):
    existing = make_vm()
    response = client_for(admin_user).post(
        "/api/vms/",
        {"name": existing.name, "cluster": existing.cluster_id, "template": existing.template_id},
    )

    assert response.status_code == 400
    assert "name" in response.json()
    assert "non_field_errors" not in response.json()


def test_filtering_by_an_invisible_cluster_answers_like_a_missing_one(
    make_user, grant, make_cluster, client_for
):
    mine, theirs = make_cluster(), make_cluster()
    user = make_user()
    grant(user, "ClusterAdmin", mine)
    api = client_for(user)

    invisible = api.get(f"/api/vms/?cluster={theirs.pk}")
    missing = api.get("/api/vms/?cluster=999999")

    assert invisible.status_code == missing.status_code == 400
    assert set(invisible.json()) == set(missing.json()) == {"cluster"}
    assert api.get(f"/api/vms/?cluster={mine.pk}").status_code == 200


def test_an_unauthenticated_request_is_told_how_to_authenticate(db):
    response = APIClient().get("/api/vms/")

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def test_a_bad_query_parameter_is_named_with_a_list_of_messages(admin_user, client_for):
    response = client_for(admin_user).get("/api/events/", {"since": "yesterday"})

    assert response.status_code == 400
    assert response.json() == {"since": ["since and timeout must be numbers."]}


def test_a_bad_grant_filter_is_named_with_a_list_of_messages(admin_user, client_for):
    response = client_for(admin_user).get("/api/permissions/", {"object_id": "seven"})

    assert response.status_code == 400
    assert response.json() == {"object_id": ["A whole number is required."]}


def test_a_refusal_of_the_whole_request_is_a_detail_message(admin_user, client_for):
    response = client_for(admin_user).post(f"/api/users/{admin_user.pk}/deactivate/")

    assert response.status_code == 400
    assert response.json() == {"detail": "You cannot deactivate yourself."}
    admin_user.refresh_from_db()
    assert admin_user.is_active

"""Application credentials in the admin console: listed without secrets for whoever may see
users; deleted by whoever may change them, which ends the credential's log-ins at once."""

from __future__ import annotations

import pytest

from openstack.identity.services import create_credential
from project.models import ApplicationCredential
from tests.openstack.test_application_credentials import credential_login
from tests.project.admin.fixtures import admin_url, logged_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def ci(make_user):
    return create_credential(make_user("carol-ac"), "ci", description="the CI farm")


def test_the_list_shows_credentials_and_their_owners_but_no_secret(superuser_console, ci):
    credential, secret = ci

    response = superuser_console.get(admin_url("project.ApplicationCredential", "changelist"))

    assert [c.pk for c in response.context["cl"].result_list] == [credential.pk]
    page = response.content.decode()
    assert "carol-ac" in page and "the CI farm" in page
    assert secret not in page and credential.secret_hash not in page
    shown = superuser_console.get(
        admin_url("project.ApplicationCredential", "change", credential.pk)
    )
    assert shown.status_code == 200
    assert credential.secret_hash not in shown.content.decode()


def test_deleting_one_in_the_console_ends_its_log_ins(superuser_console, ci):
    credential, secret = ci
    assert credential_login(id=credential.pk, secret=secret).status_code == 201

    response = superuser_console.post(
        admin_url("project.ApplicationCredential", "delete", credential.pk), {"post": "yes"}
    )

    assert response.status_code == 302
    assert not ApplicationCredential.objects.exists()
    assert credential_login(id=credential.pk, secret=secret).status_code == 401


def test_a_cluster_admin_does_not_see_users_credentials(console_of_a, ci):
    response = console_of_a.get(admin_url("project.ApplicationCredential", "changelist"))

    assert response.status_code == 403


def test_a_user_reader_sees_them_but_may_not_delete_them(staff_with_role, ci):
    credential, _ = ci
    reader = logged_in(staff_with_role(["auth.view_user"], None))

    listed = reader.get(admin_url("project.ApplicationCredential", "changelist"))
    refused = reader.post(
        admin_url("project.ApplicationCredential", "delete", credential.pk), {"post": "yes"}
    )

    assert listed.status_code == 200
    assert refused.status_code == 403
    assert ApplicationCredential.objects.filter(pk=credential.pk).exists()

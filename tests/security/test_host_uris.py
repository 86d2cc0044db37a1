"""A host URI that could make libvirt run a program is refused wherever a host is written.

Anyone who may add or change a host (a ClusterAdmin of its cluster, not only a superuser)
sets its URI, and the task clusters open it: so the API and the admin console both refuse
every URI outside the allowlist with a message on the URI field, and store nothing. The URIs
people really write still work.
"""

from __future__ import annotations

import pytest

from hosts.driver.uris import refusal
from hosts.models import Host
from tests.project.admin.fixtures import admin_url, logged_in, page_form
from tests.security.uris import ACCEPTED, REFUSED

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster(make_cluster):
    return make_cluster("lab")


@pytest.fixture(params=["superuser", "cluster_admin"])
def caller(request, make_user, grant, cluster):
    """A superuser, or a staff user holding ClusterAdmin on the cluster only."""
    if request.param == "superuser":
        return make_user(superuser=True)
    user = make_user(is_staff=True)
    grant(user, "ClusterAdmin", cluster)
    return user


@pytest.fixture
def host(make_host, cluster):
    return make_host(cluster, name="kvm1", uri="qemu+ssh://root@kvm1.example.org/system")


def stored(host: Host) -> dict:
    return Host.objects.values().get(pk=host.pk)


def uri_errors(response) -> str:
    """The messages the admin form shows on its URI field."""
    assert response.status_code == 200, response.get("Location")
    return " ".join(response.context["adminform"].form.errors["uri"])


def host_form(console, url: str, **fields) -> dict:
    # The JSON fields are posted as the text the form's widgets hold.
    return {**page_form(console, url), "networks": "[]", "capabilities": "{}", **fields}


# --- The check itself -------------------------------------------------------------------------


@pytest.mark.parametrize("uri,phrase", REFUSED.items())
def test_the_allowlist_refuses_a_uri_with_a_reason(uri, phrase):
    assert phrase in refusal(uri)


@pytest.mark.parametrize("uri", ACCEPTED)
def test_the_allowlist_accepts_the_uris_people_write(uri):
    assert refusal(uri) is None


# --- The API ----------------------------------------------------------------------------------


@pytest.mark.parametrize("uri,phrase", REFUSED.items())
def test_the_api_refuses_a_new_host_with_such_a_uri(caller, client_for, cluster, uri, phrase):
    response = client_for(caller).post(
        "/api/hosts/", {"name": "new-host", "cluster": cluster.pk, "uri": uri}, format="json"
    )

    assert response.status_code == 400
    assert list(response.json()) == ["uri"]
    assert phrase in " ".join(response.json()["uri"])
    assert not Host.objects.filter(name="new-host").exists()


@pytest.mark.parametrize("uri,phrase", REFUSED.items())
def test_the_api_refuses_to_give_a_host_such_a_uri(caller, client_for, host, uri, phrase):
    before = stored(host)

    response = client_for(caller).patch(
        f"/api/hosts/{host.pk}/", {"uri": uri, "description": "moved"}, format="json"
    )

    assert response.status_code == 400
    assert list(response.json()) == ["uri"]
    assert phrase in " ".join(response.json()["uri"])
    assert stored(host) == before


@pytest.mark.parametrize("uri", ACCEPTED)
def test_the_api_accepts_a_host_with_a_uri_people_write(caller, client_for, cluster, uri):
    response = client_for(caller).post(
        "/api/hosts/", {"name": "new-host", "cluster": cluster.pk, "uri": uri}, format="json"
    )

    assert response.status_code == 201, response.json()
    assert Host.objects.get(name="new-host").uri == uri


# --- The admin console ------------------------------------------------------------------------


@pytest.mark.parametrize("uri,phrase", REFUSED.items())
def test_the_admin_console_refuses_a_new_host_with_such_a_uri(caller, cluster, uri, phrase):
    console = logged_in(caller)
    url = admin_url("hosts.Host", "add")

    response = console.post(
        url, host_form(console, url, name="new-host", cluster=cluster.pk, uri=uri)
    )

    assert phrase in uri_errors(response)
    assert not Host.objects.filter(name="new-host").exists()


@pytest.mark.parametrize("uri,phrase", REFUSED.items())
def test_the_admin_console_refuses_to_give_a_host_such_a_uri(caller, host, uri, phrase):
    before = stored(host)
    console = logged_in(caller)
    url = admin_url("hosts.Host", "change", host.pk)

    response = console.post(url, host_form(console, url, uri=uri, description="moved"))

    assert phrase in uri_errors(response)
    assert stored(host) == before


@pytest.mark.parametrize("uri", ACCEPTED)
def test_the_admin_console_accepts_a_uri_people_write(caller, host, uri):
    console = logged_in(caller)
    url = admin_url("hosts.Host", "change", host.pk)

    response = console.post(url, host_form(console, url, uri=uri))

    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Host.objects.get(pk=host.pk).uri == uri

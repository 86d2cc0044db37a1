"""A host's migration address is a plain host name or IP address, wherever it is written.

It becomes the host part of libvirt's migration URI (``tcp://ADDRESS``) for every migration
to the host, and a ClusterAdmin may set it: so the API and the admin console refuse anything
else (a scheme, a port, a user, a path, an option) with a message on the field and store
nothing, and the driver refuses such an address again before libvirt sees it. An empty address
means the host name of the host's URI.
"""

from __future__ import annotations

import pytest

from hosts import driver
from hosts.driver.libvirt.domains import migration_params
from hosts.driver.uris import address_refusal, migration_uri
from hosts.models import Host
from tests.project.admin.fixtures import admin_url, logged_in, page_form

pytestmark = pytest.mark.django_db

ACCEPTED = {
    "kvm1.example.org": "tcp://kvm1.example.org",
    "kvm1": "tcp://kvm1",
    "192.0.2.10": "tcp://192.0.2.10",
    "2001:db8::10": "tcp://[2001:db8::10]",
    "[2001:db8::10]": "tcp://[2001:db8::10]",
}
REFUSED = [
    "tcp://192.0.2.10",
    "192.0.2.10:49152",
    "root@kvm1",
    "kvm1/system",
    "kvm1?listen_address=0.0.0.0",
    "-oProxyCommand=sh",
    "kvm1 kvm2",
    "fe80::1%eth0",
    "256.1.1.1",
    "kvm_1.example.org",
    "a" * 64 + ".example.org",
]


@pytest.fixture
def cluster(make_cluster):
    return make_cluster("lab")


@pytest.fixture
def cluster_admin(make_user, grant, cluster):
    user = make_user(is_staff=True)
    grant(user, "ClusterAdmin", cluster)
    return user


@pytest.fixture
def host(make_host, cluster):
    return make_host(cluster, name="kvm1", uri="qemu+ssh://root@kvm1.example.org/system")


@pytest.mark.parametrize("address,uri", ACCEPTED.items())
def test_a_plain_name_or_address_becomes_the_migration_uri(address, uri):
    assert address_refusal(address) is None
    assert migration_uri(address) == uri


@pytest.mark.parametrize("address", REFUSED)
def test_anything_else_is_refused_and_never_reaches_libvirt(address):
    assert "host name or an IP address only" in address_refusal(address)
    with pytest.raises(driver.DriverError) as refused:
        migration_params(address)
    assert refused.value.message == "Corral does not send a migration to this address."


@pytest.mark.parametrize("address", REFUSED)
def test_the_api_refuses_such_an_address_on_its_field_and_keeps_the_old(
    client_for, cluster_admin, host, address
):
    Host.objects.filter(pk=host.pk).update(migration_address="192.0.2.10")

    response = client_for(cluster_admin).patch(
        f"/api/hosts/{host.pk}/", {"migration_address": address}, format="json"
    )

    assert response.status_code == 400
    assert "host name or an IP address only" in " ".join(response.json()["migration_address"])
    assert Host.objects.get(pk=host.pk).migration_address == "192.0.2.10"


def test_the_api_takes_an_address_and_shows_it(client_for, cluster_admin, host):
    client = client_for(cluster_admin)

    response = client.patch(
        f"/api/hosts/{host.pk}/", {"migration_address": "2001:db8::10"}, format="json"
    )

    assert response.status_code == 200, response.json()
    assert client.get(f"/api/hosts/{host.pk}/").json()["migration_address"] == "2001:db8::10"


def test_the_admin_console_refuses_such_an_address_on_its_field(cluster_admin, host):
    console = logged_in(cluster_admin)
    url = admin_url("hosts.Host", "change", host.pk)
    form = {**page_form(console, url), "networks": "[]", "capabilities": "{}"}

    response = console.post(url, {**form, "migration_address": "kvm1:49152"})

    assert response.status_code == 200
    errors = " ".join(response.context["adminform"].form.errors["migration_address"])
    assert "host name or an IP address only" in errors
    assert Host.objects.get(pk=host.pk).migration_address == ""

    response = console.post(url, {**form, "migration_address": "10.1.2.3"})

    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Host.objects.get(pk=host.pk).migration_address == "10.1.2.3"


@pytest.mark.parametrize(
    "uri,address,target",
    [
        ("qemu+ssh://root@kvm1.example.org/system", "", "kvm1.example.org"),
        ("qemu+tls://[2001:db8::7]/system", "", "2001:db8::7"),
        ("qemu+ssh://root@kvm1.example.org/system", "10.9.8.7", "10.9.8.7"),
        # A host on Corral's own machine: libvirt's own choice, unless an address is given.
        ("qemu:///system", "", ""),
        ("qemu:///system", "127.0.0.3", "127.0.0.3"),
    ],
)
def test_migrations_go_to_the_address_else_the_uris_host_name(
    make_host, cluster, uri, address, target
):
    host = make_host(cluster, uri=uri, migration_address=address)

    assert host.migration_target == target


def test_the_api_schema_documents_the_storage_and_migration_fields(client_for):
    schema = client_for().get("/api/schema/", {"format": "json"}).json()

    fields = schema["components"]["schemas"]["Host"]["properties"]
    assert "host name or IP address" in fields["migration_address"]["description"]
    assert "shared storage" in fields["shared_storage"]["description"]
    assert fields["storage_problem"]["readOnly"] is True

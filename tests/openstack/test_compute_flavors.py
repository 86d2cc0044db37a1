"""Nova's version documents, microversions, errors and flavors: templates a user may use are
public flavors; an instance reservation of an active lease is its owner's private flavor."""

from __future__ import annotations

import pytest
import time_machine

from leases import lifecycle
from openstack.compute.base import MAX_VERSION, version_text
from tests.leases.fixtures import at, instances
from tests.openstack.conftest import nova_get

pytestmark = pytest.mark.django_db
V = "/compute/v2.1"


def test_the_version_documents_answer_without_a_token(client):
    root = client.get("/compute")
    version = client.get(f"{V}/")

    assert root.status_code == 200
    assert [v["id"] for v in root.json()["versions"]] == ["v2.1"]
    body = version.json()["version"]
    assert (body["min_version"], body["version"]) == ("2.1", version_text(MAX_VERSION))
    assert body["links"][0]["href"] == "http://testserver/compute/v2.1/"


def test_a_token_gets_compute_and_every_other_service_in_the_catalog(client, make_user):
    make_user("ann")
    body = {
        "auth": {
            "identity": {
                "methods": ["password"],
                "password": {
                    "user": {"name": "ann", "domain": {"id": "default"}, "password": "pw-Corral-1"}
                },
            }
        }
    }
    token = client.post("/identity/v3/auth/tokens", body, content_type="application/json")

    urls = {
        entry["type"]: entry["endpoints"][0]["url"] for entry in token.json()["token"]["catalog"]
    }
    assert urls["compute"] == "http://testserver/compute/v2.1"
    assert urls["reservation"] == "http://testserver/reservation/v1"


def test_without_a_token_nova_answers_keystones_401(client):
    response = client.get(f"{V}/flavors")

    assert response.status_code == 401
    assert response.json()["error"]["message"] == (
        "The request you have made requires authentication."
    )
    assert response["WWW-Authenticate"].startswith("Keystone uri=")


def test_microversions_are_honoured_and_named_in_the_answer(nova_for, make_user):
    nova = nova_for(make_user())

    default = nova.get(f"{V}/flavors")
    asked = nova.get(f"{V}/flavors", HTTP_OPENSTACK_API_VERSION="compute 2.25")
    older = nova.get(f"{V}/flavors", HTTP_X_OPENSTACK_NOVA_API_VERSION="2.10")
    latest = nova.get(f"{V}/flavors", HTTP_OPENSTACK_API_VERSION="compute latest")

    assert default["OpenStack-API-Version"] == "compute 2.1"
    assert asked["OpenStack-API-Version"] == "compute 2.25"
    assert older["X-OpenStack-Nova-API-Version"] == "2.10"
    assert latest["X-OpenStack-Nova-API-Version"] == version_text(MAX_VERSION)


def test_a_microversion_out_of_range_or_malformed_is_refused_in_novas_words(nova_for, make_user):
    nova = nova_for(make_user())

    high = nova.get(f"{V}/flavors", HTTP_OPENSTACK_API_VERSION="compute 2.999")
    bad = nova.get(f"{V}/flavors", HTTP_OPENSTACK_API_VERSION="compute two")

    assert high.status_code == 406
    assert high.json()["notAcceptable"]["message"] == (
        "Version 2.999 is not supported by the API. Minimum is 2.1 and maximum is "
        f"{version_text(MAX_VERSION)}."
    )
    assert bad.status_code == 400
    assert "is of invalid format" in bad.json()["badRequest"]["message"]


def test_an_unknown_compute_path_is_novas_404_in_json(nova_for, make_user):
    response = nova_for(make_user()).get(f"{V}/no-such-thing")

    assert response.status_code == 404
    assert response.json() == {
        "itemNotFound": {"code": 404, "message": "The resource could not be found."}
    }


def test_templates_a_user_may_use_are_public_flavors_of_their_size(
    nova_for, make_user, make_template, make_cluster, grant
):
    user = make_user()
    cluster, other = make_cluster(), make_cluster()
    make_template("small", cluster=cluster, vcpus=1, memory_mb=512, disk_gb=4)
    make_template("elsewhere", cluster=other)
    grant(user, "PowerUser", cluster)

    listed = nova_get(nova_for(user), f"{V}/flavors/detail")["flavors"]
    shown = nova_get(nova_for(user), f"{V}/flavors/small")["flavor"]

    assert [flavor["name"] for flavor in listed] == ["small"]
    assert (shown["id"], shown["vcpus"], shown["ram"], shown["disk"]) == ("small", 1, 512, 4)
    assert shown["os-flavor-access:is_public"] is True
    hidden = nova_for(user).get(f"{V}/flavors/elsewhere")
    assert hidden.status_code == 404
    assert hidden.json()["itemNotFound"]["message"] == "Flavor elsewhere could not be found."


def test_an_active_instance_reservation_is_its_owners_private_flavor_while_active(
    nova_for, make_lease, lease_user, reservable_hosts
):
    reservable_hosts(2)
    owner, other = lease_user(), lease_user()
    lease = make_lease(at(10), at(12), instances(2, vcpus=2, memory_mb=1024), owner=owner)
    reservation = lease.reservations.get()
    flavor_id = str(reservation.pk)

    with time_machine.travel(at(9), tick=False):
        before = nova_get(nova_for(owner), f"{V}/flavors")["flavors"]
    with time_machine.travel(at(10, 0), tick=False):
        lifecycle.start_lease(lease)
        during = nova_get(nova_for(owner), f"{V}/flavors/{flavor_id}")["flavor"]
        others = nova_get(nova_for(other), f"{V}/flavors")["flavors"]
        private = nova_get(nova_for(owner), f"{V}/flavors?is_public=false")["flavors"]
    with time_machine.travel(at(12, 0), tick=False):
        lifecycle.end_lease(lease)
        after = nova_for(owner).get(f"{V}/flavors/{flavor_id}")

    assert flavor_id not in [flavor["id"] for flavor in before]
    assert (during["name"], during["vcpus"], during["ram"]) == (f"reservation:{flavor_id}", 2, 1024)
    assert during["os-flavor-access:is_public"] is False
    assert [flavor["id"] for flavor in private] == [flavor_id]
    assert flavor_id not in [flavor["id"] for flavor in others]
    assert after.status_code == 404


def test_a_users_own_template_is_their_private_flavor_and_no_one_elses(
    nova_for, make_user, make_template, make_cluster, grant, admin_user
):
    cluster = make_cluster()
    alice, bob = make_user("alice"), make_user("bob")
    for user in (alice, bob):
        grant(user, "PowerUser", cluster)
    make_template("small", cluster=cluster)
    make_template("alices", cluster=cluster, owner=alice, visibility="private", vcpus=2)

    listed = nova_get(nova_for(alice), f"{V}/flavors/detail")["flavors"]
    private = nova_get(nova_for(alice), f"{V}/flavors?is_public=false")["flavors"]
    others = nova_get(nova_for(bob), f"{V}/flavors")["flavors"]
    hidden = nova_for(bob).get(f"{V}/flavors/alices")
    access = nova_get(nova_for(admin_user), f"{V}/flavors/alices/os-flavor-access")

    assert [(f["name"], f["os-flavor-access:is_public"]) for f in listed] == [
        ("alices", False),
        ("small", True),
    ]
    assert [flavor["name"] for flavor in private] == ["alices"]
    assert [flavor["name"] for flavor in others] == ["small"]
    assert hidden.status_code == 404
    assert access == {"flavor_access": [{"flavor_id": "alices", "tenant_id": str(alice.pk)}]}

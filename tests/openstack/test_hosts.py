"""Blazar's os-hosts over HTTP: a Blazar host is a Corral host marked reservable; its extra
capabilities are the host's capabilities; writes need an admin role on the host. A host joins
the free pool with the VMs running on it counted, and leaves it with its leases planned again
elsewhere (refused while their VMs run there)."""

from __future__ import annotations

import pytest

from hosts.models import Host
from leases import lifecycle, services
from leases.models import Allocation, HostProperty, Lease
from tests.conftest import unique
from tests.leases.fixtures import at, instances, whole_hosts
from tests.openstack.conftest import API


def error(response) -> str:
    body = response.json()
    assert body["error_code"] == response.status_code
    return body["error_message"]


@pytest.fixture
def cluster_admin(make_user, grant, make_cluster):
    """A user holding ClusterAdmin on a new cluster: (user, cluster)."""
    user, cluster = make_user(), make_cluster()
    grant(user, "ClusterAdmin", cluster)
    return user, cluster


@pytest.fixture
def as_admin(blazar_for, cluster_admin):
    return blazar_for(cluster_admin[0])


@pytest.fixture
def plain_host(cluster_admin, make_host):
    """An Up host of the admin's cluster, not reservable yet."""
    return make_host(cluster=cluster_admin[1], status="up", cpus=16, memory_mb=3072)


def test_create_marks_the_named_corral_host_reservable_with_extra_capabilities(
    as_admin, plain_host
):
    response = as_admin.post(
        f"{API}/os-hosts", {"name": plain_host.name, "gpu": "a100", "rack": "r7"}, format="json"
    )

    assert response.status_code == 201
    host = response.json()["host"]
    assert host["id"] == str(plain_host.pk)
    assert host["hypervisor_hostname"] == plain_host.name
    assert (host["vcpus"], host["memory_mb"]) == (16, 3072)
    assert (host["gpu"], host["rack"]) == ("a100", "r7")
    plain_host.refresh_from_db()
    assert plain_host.reservable
    assert plain_host.capabilities == {"gpu": "a100", "rack": "r7"}


def test_create_by_cluster_and_name_or_by_id(as_admin, cluster_admin, make_host):
    first = make_host(cluster=cluster_admin[1])
    second = make_host(cluster=cluster_admin[1])

    by_path = as_admin.post(
        f"{API}/os-hosts", {"name": f"{cluster_admin[1].name}/{first.name}"}, format="json"
    )
    by_id = as_admin.post(f"{API}/os-hosts", {"id": str(second.pk)}, format="json")

    assert (by_path.status_code, by_id.status_code) == (201, 201)
    assert set(Host.objects.filter(reservable=True).values_list("pk", flat=True)) == {
        first.pk,
        second.pk,
    }


def test_a_name_in_two_clusters_needs_the_cluster(
    blazar_for, make_user, grant, make_cluster, make_host
):
    admin = make_user()
    one, two = make_cluster(), make_cluster()
    for cluster in (one, two):
        grant(admin, "ClusterAdmin", cluster)
        make_host(cluster=cluster, name="twin", uri=f"qemu+ssh://root@{unique('n')}/system")

    response = blazar_for(admin).post(f"{API}/os-hosts", {"name": "twin"}, format="json")

    assert response.status_code == 400
    assert error(response) == (
        f"name: Hosts named twin are in clusters {one.name}, {two.name}: give cluster/name or id."
    )
    assert not Host.objects.filter(reservable=True).exists()


def test_a_host_the_admin_cannot_see_is_not_found(as_admin, make_host):
    hidden = make_host()

    response = as_admin.post(f"{API}/os-hosts", {"name": hidden.name}, format="json")

    assert response.status_code == 404
    assert error(response) == f"Host {hidden.name} not found."
    hidden.refresh_from_db()
    assert not hidden.reservable


def test_a_viewer_without_an_admin_role_is_refused(blazar_for, make_user, grant, plain_host):
    viewer = make_user()
    grant(viewer, "PolicyAdmin", plain_host.cluster)  # may see hosts, not change them

    response = blazar_for(viewer).post(f"{API}/os-hosts", {"name": plain_host.name}, format="json")

    assert response.status_code == 403
    assert error(response) == "Policy doesn't allow blazar:oshosts:post to be performed"
    plain_host.refresh_from_db()
    assert not plain_host.reservable


def test_an_admin_of_other_hosts_is_refused_this_one(
    blazar_for, make_user, grant, make_cluster, plain_host
):
    other_admin = make_user()
    grant(other_admin, "ClusterAdmin", make_cluster())
    grant(other_admin, "PolicyAdmin", plain_host.cluster)  # sees the host, may not change it

    response = blazar_for(other_admin).post(
        f"{API}/os-hosts", {"name": plain_host.name}, format="json"
    )

    assert response.status_code == 403
    assert error(response) == f"Making host {plain_host.name} reservable needs an admin role on it."


@pytest.mark.parametrize(
    "method, path, body, action",
    [
        ("post", "/os-hosts", {"name": "HOST"}, "post"),
        ("put", "/os-hosts/ID", {"gpu": "x"}, "put"),
        ("delete", "/os-hosts/ID", None, "delete"),
        ("get", "/os-hosts/allocations", None, "get_allocations"),
        ("get", "/os-hosts/ID/allocation", None, "get_allocations"),
        ("patch", "/os-hosts/properties/gpu", {"private": True}, "update_resource_properties"),
    ],
)
def test_admin_only_calls_check_the_role_before_looking_anything_up(
    blazar_for, lease_user, reservable_hosts, method, path, body, action
):
    (hidden,) = reservable_hosts(1, capabilities={"gpu": "a100"})
    url = API + path.replace("HOST", hidden.name).replace("ID", str(hidden.pk))
    body = body and {
        k: v.replace("HOST", hidden.name) if isinstance(v, str) else v for k, v in body.items()
    }

    response = getattr(blazar_for(lease_user()), method)(url, body, format="json")

    assert response.status_code == 403
    assert error(response) == f"Policy doesn't allow blazar:oshosts:{action} to be performed"
    hidden.refresh_from_db()
    assert hidden.reservable and hidden.capabilities == {"gpu": "a100"}


def test_an_extra_capability_name_over_64_characters_is_blazars_400(as_admin, plain_host):
    response = as_admin.post(
        f"{API}/os-hosts", {"name": plain_host.name, "k" * 65: "v"}, format="json"
    )

    assert response.status_code == 400
    assert error(response) == "Extra capability key too long"
    plain_host.refresh_from_db()
    assert not plain_host.reservable


def test_a_host_running_vms_outside_leases_joins_with_their_capacity_held_back(
    as_admin, plain_host, make_vm, make_lease
):
    make_vm(cluster=plain_host.cluster, host=plain_host, status="up", memory_mb=2048, vcpus=1)
    make_vm(cluster=plain_host.cluster, host=plain_host, status="down", memory_mb=2048, vcpus=1)

    response = as_admin.post(f"{API}/os-hosts", {"name": plain_host.name}, format="json")

    assert response.status_code == 201
    plain_host.refresh_from_db()
    assert plain_host.reservable
    with pytest.raises(services.LeaseRefused) as refused:
        make_lease(at(9), at(10), instances(2))
    assert str(refused.value) == (
        f"The lease does not fit: only 1 of 2 instances fit between {at(9):%Y-%m-%d} 09:00 and "
        f"{at(10):%Y-%m-%d} 10:00 (2 instances of 1024 MiB need 2048 MiB free; 1024 are free). "
        f"No 1-hour window that starts in the 30 days after {at(9):%Y-%m-%d} 09:00 (UTC) fits."
    )
    assert make_lease(at(9), at(10), instances(1)).reservations.get().amount == 1


@pytest.mark.parametrize(
    "extra, field, message",
    [
        ({"vcpus": "8"}, "vcpus", "A field of the host itself, not an extra capability."),
        ({"gpu": {"model": "a100"}}, "gpu", "A capability is text, a number or true/false."),
        ({"bad key": "x"}, "bad key", "A capability name is up to 64 letters, digits and _.:- ."),
    ],
)
def test_a_bad_capability_is_a_400_naming_it(as_admin, plain_host, extra, field, message):
    response = as_admin.post(f"{API}/os-hosts", {"name": plain_host.name, **extra}, format="json")

    assert response.status_code == 400
    assert error(response) == f"{field}: {message}"
    plain_host.refresh_from_db()
    assert not plain_host.reservable


def test_an_already_reservable_host_is_a_409(as_admin, plain_host):
    Host.objects.filter(pk=plain_host.pk).update(reservable=True)

    response = as_admin.post(f"{API}/os-hosts", {"name": plain_host.name}, format="json")

    assert response.status_code == 409
    assert error(response) == f"Host {plain_host.name} is reservable already."


def test_list_and_show_hold_only_reservable_hosts_the_caller_may_see(
    as_admin, cluster_admin, reservable_hosts, make_host
):
    (mine,) = reservable_hosts(1, cluster=cluster_admin[1], capabilities={"gpu": "a100"})
    make_host(cluster=cluster_admin[1])  # not reservable
    (elsewhere,) = reservable_hosts(1)

    listed = as_admin.get(f"{API}/os-hosts").json()["hosts"]
    shown = as_admin.get(f"{API}/os-hosts/{mine.pk}")

    assert [(h["id"], h["hypervisor_hostname"], h["gpu"]) for h in listed] == [
        (str(mine.pk), mine.name, "a100")
    ]
    assert shown.json()["host"] == listed[0]
    assert as_admin.get(f"{API}/os-hosts/{elsewhere.pk}").status_code == 404


def test_update_sets_and_removes_extra_capabilities(as_admin, cluster_admin, reservable_hosts):
    (host,) = reservable_hosts(1, cluster=cluster_admin[1], capabilities={"gpu": "a100", "x": 1})

    response = as_admin.put(
        f"{API}/os-hosts/{host.pk}", {"gpu": "h100", "x": None, "ssd": True}, format="json"
    )

    assert response.status_code == 200
    shown = response.json()["host"]
    assert (shown["gpu"], shown["ssd"], "x" in shown) == ("h100", True, False)
    host.refresh_from_db()
    assert host.capabilities == {"gpu": "h100", "ssd": True}


def test_an_empty_update_is_a_400(as_admin, cluster_admin, reservable_hosts):
    (host,) = reservable_hosts(1, cluster=cluster_admin[1])

    response = as_admin.put(f"{API}/os-hosts/{host.pk}", {}, format="json")

    assert response.status_code == 400
    assert error(response) == "No data to update"


def test_a_capability_a_live_lease_relies_on_cannot_change(
    as_admin, cluster_admin, reservable_hosts, make_lease
):
    (host,) = reservable_hosts(1, cluster=cluster_admin[1], capabilities={"gpu": "a100"})
    lease = make_lease(at(9), at(10), whole_hosts(1, gpu="a100"), name="gpu-lease")

    response = as_admin.put(f"{API}/os-hosts/{host.pk}", {"gpu": "none"}, format="json")

    assert response.status_code == 409
    assert error(response) == (
        f"Leases {lease.name} hold host {host.name} for its gpu; that cannot change while they do."
    )
    host.refresh_from_db()
    assert host.capabilities == {"gpu": "a100"}


def test_delete_unmarks_the_host_and_keeps_the_corral_host(
    as_admin, cluster_admin, reservable_hosts
):
    (host,) = reservable_hosts(1, cluster=cluster_admin[1], capabilities={"gpu": "a100"})

    response = as_admin.delete(f"{API}/os-hosts/{host.pk}")

    assert response.status_code == 204
    host.refresh_from_db()
    assert not host.reservable
    assert host.capabilities == {"gpu": "a100"}
    assert as_admin.get(f"{API}/os-hosts/{host.pk}").status_code == 404


def test_deleting_a_reserved_host_moves_its_leases_and_says_so(
    as_admin, cluster_admin, reservable_hosts, make_lease
):
    first, second = reservable_hosts(2, cluster=cluster_admin[1])
    lease = make_lease(at(9), at(10), instances(1))
    reservation = lease.reservations.get()
    assert list(reservation.allocations.values_list("host_id", flat=True)) == [first.pk]

    response = as_admin.delete(f"{API}/os-hosts/{first.pk}")

    assert response.status_code == 200
    body = response.json()
    assert body["host"]["reservable"] is False
    assert body["reservations"] == [
        {
            "lease_id": str(lease.uuid),
            "lease_name": lease.name,
            "reservation_id": str(reservation.pk),
            "moved": 1,
            "missing": 0,
            "message": f"Lease {lease.name}: capacity moved as host {first.name} is no longer "
            f"reservable: reservation {reservation.pk} now also holds 1 instance on "
            f"{second.name}.",
        }
    ]
    assert list(reservation.allocations.values_list("host_id", flat=True)) == [second.pk]
    assert not Lease.objects.get(pk=lease.pk).degraded


def test_deleting_the_last_reserved_host_degrades_its_leases(
    as_admin, blazar_for, cluster_admin, reservable_hosts, make_lease
):
    (host,) = reservable_hosts(1, cluster=cluster_admin[1])
    lease = make_lease(at(9), at(10), instances(2))
    reservation = lease.reservations.get()

    response = as_admin.delete(f"{API}/os-hosts/{host.pk}")

    assert response.status_code == 200
    [outcome] = response.json()["reservations"]
    assert (outcome["moved"], outcome["missing"]) == (0, 2)
    assert outcome["message"] == (
        f"Lease {lease.name} is degraded: reservation {reservation.pk} is 2 of 2 instances "
        f"short from {at(9):%Y-%m-%d} 09:00 (host {host.name} is no longer reservable); no free "
        "reservable capacity can take them."
    )
    assert Lease.objects.get(pk=lease.pk).degraded
    # What it is owed stays counted, on no host, until capacity returns.
    assert list(
        Allocation.objects.filter(reservation=reservation).values_list("host", "slots")
    ) == [(None, 2)]
    shown = blazar_for(lease.owner).get(f"{API}/leases/{lease.uuid}").json()["lease"]
    assert shown["degraded"] is True
    assert shown["reservations"][0]["missing_resources"] is True


def test_a_host_running_vms_of_a_lease_cannot_be_unmarked(
    as_admin, cluster_admin, reservable_hosts, make_lease, make_vm
):
    first, second = reservable_hosts(2, cluster=cluster_admin[1])
    lease = make_lease(at(-48), at(10), instances(1))
    lifecycle.start_lease(lease)
    vm = make_vm(
        cluster=first.cluster,
        host=first,
        reservation=lease.reservations.get(),
        status="up",
        memory_mb=1024,
        vcpus=1,
    )

    response = as_admin.delete(f"{API}/os-hosts/{first.pk}")

    assert response.status_code == 409
    assert error(response) == (
        f"Host {first.name} runs VMs of leases ({vm.name}); it stays reservable until they stop "
        "or move."
    )
    first.refresh_from_db()
    assert first.reservable
    assert list(lease.reservations.get().allocations.values_list("host_id", flat=True)) == [
        first.pk
    ]


def test_writes_by_a_viewer_are_refused(blazar_for, make_user, grant, reservable_hosts):
    (host,) = reservable_hosts(1)
    viewer = make_user()
    grant(viewer, "PolicyAdmin", host.cluster)
    client = blazar_for(viewer)

    responses = [
        client.put(f"{API}/os-hosts/{host.pk}", {"gpu": "x"}, format="json"),
        client.delete(f"{API}/os-hosts/{host.pk}"),
    ]

    assert [r.status_code for r in responses] == [403, 403]
    host.refresh_from_db()
    assert host.reservable and host.capabilities == {}
    assert client.get(f"{API}/os-hosts/{host.pk}").status_code == 200


def test_allocations_list_the_reservations_on_each_host(
    as_admin, cluster_admin, reservable_hosts, make_lease
):
    first, second = reservable_hosts(2, cluster=cluster_admin[1])
    lease = make_lease(at(9), at(10), whole_hosts(1))
    reservation = lease.reservations.get()
    held = reservation.allocations.get().host

    listed = as_admin.get(f"{API}/os-hosts/allocations").json()["allocations"]
    one = as_admin.get(f"{API}/os-hosts/{held.pk}/allocation").json()["allocation"]
    filtered = as_admin.get(f"{API}/os-hosts/allocations?lease_id=other").json()["allocations"]

    expected = {
        "id": str(reservation.pk),
        "lease_id": str(lease.uuid),
        "start_date": f"{at(9):%Y-%m-%dT%H:%M:%S.%f}",
        "end_date": f"{at(10):%Y-%m-%dT%H:%M:%S.%f}",
    }
    by_host = {item["resource_id"]: item["reservations"] for item in listed}
    assert by_host == {
        str(held.pk): [expected],
        str((second if held == first else first).pk): [],
    }
    assert one == {"resource_id": str(held.pk), "reservations": [expected]}
    assert all(item["reservations"] == [] for item in filtered)


def test_properties_list_public_ones_and_admins_see_private_ones(
    blazar_for, admin_user, lease_user, reservable_hosts
):
    reservable_hosts(1, capabilities={"gpu": "a100", "rack": "r1"})
    reservable_hosts(1, capabilities={"gpu": "h100"})
    HostProperty.objects.create(name="rack", private=True)
    user, admin = blazar_for(lease_user()), blazar_for(admin_user)

    names = user.get(f"{API}/os-hosts/properties").json()["resource_properties"]
    detail = user.get(f"{API}/os-hosts/properties?detail=True&all=True").json()
    everything = admin.get(f"{API}/os-hosts/properties?detail=True&all=True").json()

    assert names == [{"property": "gpu"}]
    assert detail["resource_properties"] == [
        {"property": "gpu", "private": False, "values": ["a100", "h100"]}
    ]
    assert [(p["property"], p["private"]) for p in everything["resource_properties"]] == [
        ("gpu", False),
        ("rack", True),
    ]


def test_a_property_is_made_private_by_a_system_wide_admin_only(
    blazar_for, admin_user, as_admin, reservable_hosts
):
    reservable_hosts(1, capabilities={"gpu": "a100"})
    url = f"{API}/os-hosts/properties/gpu"

    refused = as_admin.patch(url, {"private": True}, format="json")
    done = blazar_for(admin_user).patch(url, {"private": True}, format="json")

    assert refused.status_code == 403
    assert error(refused) == (
        "Policy doesn't allow blazar:oshosts:update_resource_properties to be performed"
    )
    assert done.status_code == 200
    assert done.json()["resource_property"]["property_name"] == "gpu"
    assert done.json()["resource_property"]["private"] is True
    assert HostProperty.objects.get(name="gpu").private


@pytest.mark.parametrize(
    "name, body, status, message",
    [
        ("nosuch", {"private": True}, 404, "Property nosuch not found."),
        ("gpu", {"private": "yes"}, 400, "private: true or false."),
        (
            "gpu",
            {"private": True, "values": []},
            400,
            "values: Unknown field; only private can change.",
        ),
    ],
)
def test_a_bad_property_change_is_refused(
    blazar_for, admin_user, reservable_hosts, name, body, status, message
):
    reservable_hosts(1, capabilities={"gpu": "a100"})

    response = blazar_for(admin_user).patch(
        f"{API}/os-hosts/properties/{name}", body, format="json"
    )

    assert response.status_code == status
    assert error(response) == message
    assert not HostProperty.objects.filter(private=True).exists()


@pytest.mark.parametrize("ident", ["abc", "99999999", unique("h")])
def test_an_unknown_host_id_is_not_found(as_admin, ident):
    response = as_admin.get(f"{API}/os-hosts/{ident}")

    assert response.status_code == 404
    assert error(response) == f"Host {ident} not found."

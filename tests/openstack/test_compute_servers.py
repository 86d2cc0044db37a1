"""Nova's servers on simulated hosts: created through Corral's own use cases (a pool's running
VM when one fits, else a new VM started by a real job), shown with Nova's statuses, acted on,
deleted; refused input changes nothing; what Corral will not place goes to ERROR with a
fault. The real clients drive the same in test_real_clients_compute.py."""

from __future__ import annotations

import base64
import uuid
from urllib.parse import quote

import pytest
import time_machine

from hosts import jobs
from hosts.models import (
    ConsoleLog,
    ConsoleTicket,
    Host,
    ImageMember,
    Job,
    JobState,
    VirtualMachine,
    VmStatus,
)
from hosts.operations import OPERATION_BY_KIND
from leases import lifecycle
from openstack.models import Server
from project import sshkeys
from tests.leases.fixtures import at, instances
from tests.openstack.conftest import nova_get
from tests.pools.fixtures import add_pool_vms
from tests.project.sshkeys_data import ED25519

pytestmark = pytest.mark.django_db
V = "/compute/v2.1"
LATEST = {"HTTP_OPENSTACK_API_VERSION": "compute 2.37"}


def run_jobs() -> list[Job]:
    """Run every queued job here, oldest first, as a task worker would (whatever their end)."""
    ran = []
    while job := Job.objects.filter(state=JobState.PENDING).order_by("pk").first():
        jobs.run(job.pk, OPERATION_BY_KIND)
        job.refresh_from_db()
        ran.append(job)
    return ran


@pytest.fixture
def launcher(sim_cluster, make_user, make_template, grant):
    """A PowerUser of the simulated cluster and a flavor (template) there: (user, flavor)."""
    user = make_user()
    grant(user, "PowerUser", sim_cluster)
    template = make_template("m1.small", cluster=sim_cluster, vcpus=1, memory_mb=128, disk_gb=1)
    return user, template


def create(client, **server):
    body = {"server": {"name": "web one", "flavorRef": "m1.small", "networks": "auto", **server}}
    return client.post(f"{V}/servers", body, format="json", **LATEST)


def test_a_server_is_built_then_active_on_a_simulated_host(launcher, nova_for):
    user, template = launcher
    nova = nova_for(user)

    created = create(nova, metadata={"role": "web"})
    server_id = created.json()["server"]["id"]
    building = nova_get(nova, f"{V}/servers/{server_id}")["server"]
    ran = run_jobs()
    active = nova.get(f"{V}/servers/{server_id}", **LATEST).json()["server"]

    assert created.status_code == 202
    assert created.json()["server"]["links"][0]["href"].endswith(f"/servers/{server_id}")
    assert (building["status"], building["OS-EXT-STS:task_state"]) == ("BUILD", "spawning")
    assert [job.kind for job in ran] == ["start"] and ran[0].state == JobState.SUCCEEDED
    vm = VirtualMachine.objects.get(uuid=server_id)
    assert (vm.name, vm.template_id, vm.owner_id, vm.status) == (
        "web-one",
        template.pk,
        user.pk,
        VmStatus.UP,
    )
    assert (active["status"], active["OS-EXT-STS:power_state"]) == ("ACTIVE", 1)
    assert (active["name"], active["metadata"], active["flavor"]["id"]) == (
        "web one",
        {"role": "web"},
        "m1.small",
    )
    assert active["tenant_id"] == str(user.pk)
    assert active["OS-EXT-AZ:availability_zone"] == vm.cluster.name
    assert "OS-EXT-SRV-ATTR:host" not in active  # an admin's field


def test_servers_are_listed_for_their_project_and_filtered(launcher, nova_for, make_user):
    user, _ = launcher
    nova = nova_for(user)
    first = create(nova, name="alpha").json()["server"]["id"]
    second = create(nova, name="beta").json()["server"]["id"]

    listed = nova_get(nova, f"{V}/servers")["servers"]
    detail = nova_get(nova, f"{V}/servers/detail?name=^al")["servers"]
    stranger = nova_get(nova_for(make_user()), f"{V}/servers")["servers"]

    assert {server["id"] for server in listed} == {first, second}
    assert set(listed[0]) == {"id", "name", "links"}
    assert [(server["id"], server["status"]) for server in detail] == [(first, "BUILD")]
    assert stranger == []


def test_listing_servers_takes_a_bounded_number_of_queries(
    launcher, nova_for, django_assert_max_num_queries
):
    user, _ = launcher
    nova = nova_for(user)
    for index in range(6):
        create(nova, name=f"many-{index}")

    with django_assert_max_num_queries(8):
        listed = nova.get(f"{V}/servers/detail")

    assert len(listed.json()["servers"]) == 6


def test_another_users_server_and_an_unknown_id_are_novas_404(launcher, nova_for, make_user):
    user, _ = launcher
    server_id = create(nova_for(user)).json()["server"]["id"]
    stranger = nova_for(make_user())

    hidden = stranger.get(f"{V}/servers/{server_id}")
    deleted = stranger.delete(f"{V}/servers/{server_id}")
    unknown = nova_for(user).get(f"{V}/servers/{uuid.uuid4()}")

    assert hidden.status_code == 404
    assert hidden.json() == {
        "itemNotFound": {"code": 404, "message": f"Instance {server_id} could not be found."}
    }
    assert deleted.status_code == 404
    assert unknown.status_code == 404
    assert VirtualMachine.objects.filter(uuid=server_id).exists()


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"flavorRef": None}, "flavorRef", "Flavor  could not be found."),
        ({"flavorRef": "m9.huge"}, "flavorRef", "Flavor m9.huge could not be found."),
        ({"imageRef": "not-an-image"}, "imageRef", "Image not-an-image could not be found."),
        ({"key_name": "nope"}, "key_name", "Invalid key_name provided."),
        ({"user_data": "***"}, "user_data", "User data needs to be valid base 64"),
        ({"metadata": {"a": 1}}, "metadata", "keys and values are 1 to 255 characters"),
        ({"name": "  "}, "name", "A name of 1 to 255 characters"),
        ({"max_count": 0}, "max_count", "is not a whole number from 1 to 100"),
        ({"availability_zone": "mars"}, "availability_zone", "not available: mars"),
        ({"networks": 7}, "networks", "'auto', 'none' or a list of networks."),
    ],
)
def test_a_bad_server_body_is_novas_400_naming_the_field_and_makes_nothing(
    launcher, nova_for, change, field, message
):
    user, _ = launcher

    response = create(nova_for(user), **change)

    assert response.status_code == 400
    text = response.json()["badRequest"]["message"]
    assert text.startswith(f"Invalid input for field/attribute {field}: ")
    assert message in text
    assert not VirtualMachine.objects.exists() and not Server.objects.exists()


def test_networks_are_required_from_2_37_as_in_nova(launcher, nova_for):
    user, _ = launcher
    body = {"server": {"name": "x", "flavorRef": "m1.small"}}

    response = nova_for(user).post(f"{V}/servers", body, format="json", **LATEST)
    older = nova_for(user).post(f"{V}/servers", body, format="json")

    assert response.status_code == 400
    assert "'networks' is a required property." in response.json()["badRequest"]["message"]
    assert older.status_code == 202


def test_user_data_and_an_image_of_its_own_reach_the_vm(launcher, nova_for, make_image):
    user, _ = launcher
    image = make_image(name="debian-12")
    script = "#!/bin/sh\necho hi > /tmp/hi\n"
    sshkeys.add_key(user, "laptop", ED25519)

    response = create(
        nova_for(user),
        imageRef=str(image.uuid),
        user_data=base64.b64encode(script.encode()).decode(),
        key_name="laptop",
    )

    vm = VirtualMachine.objects.get(uuid=response.json()["server"]["id"])
    assert (vm.user_data, vm.disk_image_id) == (script, image.pk)
    shown = nova_get(nova_for(user), f"{V}/servers/{vm.uuid}")["server"]
    assert (shown["image"]["id"], shown["key_name"]) == (str(image.uuid), "laptop")


def test_max_count_makes_that_many_servers_named_in_turn(launcher, nova_for):
    user, _ = launcher

    response = create(nova_for(user), name="node", max_count=3, min_count=1)

    assert response.status_code == 202
    names = sorted(Server.objects.values_list("name", flat=True))
    assert names == ["node-1", "node-2", "node-3"]
    assert VirtualMachine.objects.count() == 3


def test_a_pool_of_the_flavor_hands_over_its_running_vm_at_once(
    sim_cluster, launcher, nova_for, make_pool, grant
):
    user, template = launcher
    pool = make_pool(cluster=sim_cluster, template=template, size=1, prestarted_vms=1)
    [running] = add_pool_vms(pool, [VmStatus.UP])
    grant(user, "UserRole", pool)
    nova = nova_for(user)

    created = create(nova, name="ci node")
    shown = nova_get(nova, f"{V}/servers/{running.uuid}")["server"]

    assert created.json()["server"]["id"] == str(running.uuid)
    assert (shown["status"], shown["name"]) == ("ACTIVE", "ci node")
    running.refresh_from_db()
    assert running.owner_id == user.pk
    assert VirtualMachine.objects.count() == 1  # no VM was made

    deleted = nova.delete(f"{V}/servers/{running.uuid}")
    after = nova.get(f"{V}/servers/{running.uuid}")

    assert deleted.status_code == 204
    assert after.status_code == 404
    running.refresh_from_db()
    assert (running.owner_id, running.pool_id) == (None, pool.pk)  # back in its pool
    assert not Server.objects.exists()


def test_without_a_free_vm_in_the_pool_a_server_is_booted_instead(
    sim_cluster, launcher, nova_for, make_pool, grant
):
    user, template = launcher
    pool = make_pool(cluster=sim_cluster, template=template, size=1, max_user_vms=1)
    grant(user, "UserRole", pool)
    nova = nova_for(user)

    first = create(nova, name="a").json()["server"]["id"]
    second = create(nova, name="b").json()["server"]["id"]

    assert VirtualMachine.objects.get(uuid=first).pool_id is None  # the pool had no VM
    assert VirtualMachine.objects.get(uuid=second).pool_id is None


def test_stop_start_reboot_pause_and_unpause_run_corrals_jobs(launcher, nova_for):
    user, _ = launcher
    nova = nova_for(user)
    server_id = create(nova).json()["server"]["id"]
    run_jobs()
    action = f"{V}/servers/{server_id}/action"

    stopped = nova.post(action, {"os-stop": None}, format="json")
    run_jobs()
    status_stopped = nova_get(nova, f"{V}/servers/{server_id}")["server"]["status"]
    started = nova.post(action, {"os-start": None}, format="json")
    run_jobs()
    rebooted = nova.post(action, {"reboot": {"type": "HARD"}}, format="json")
    reboot_jobs = [job.kind for job in run_jobs()]
    nova.post(action, {"pause": None}, format="json")
    run_jobs()
    paused = nova_get(nova, f"{V}/servers/{server_id}")["server"]["status"]
    nova.post(action, {"unpause": None}, format="json")
    run_jobs()
    final = nova_get(nova, f"{V}/servers/{server_id}")["server"]["status"]

    assert (stopped.status_code, started.status_code, rebooted.status_code) == (202, 202, 202)
    assert status_stopped == "SHUTOFF"
    assert reboot_jobs == ["poweroff", "start"]
    assert paused == "PAUSED"
    assert final == "ACTIVE"


def test_an_action_the_vm_cannot_take_now_is_novas_409(launcher, nova_for):
    user, _ = launcher
    nova = nova_for(user)
    server_id = create(nova).json()["server"]["id"]
    run_jobs()

    again = nova.post(f"{V}/servers/{server_id}/action", {"os-start": None}, format="json")
    unknown = nova.post(f"{V}/servers/{server_id}/action", {"os-shelve": None}, format="json")

    assert again.status_code == 409
    assert again.json()["conflictingRequest"]["message"].startswith(
        f"Cannot 'start' instance {server_id} while it is in vm_state active"
    )
    assert unknown.status_code == 400
    assert unknown.json() == {
        "badRequest": {"code": 400, "message": "There is no such action: os-shelve"}
    }


def test_suspend_and_resume_hold_and_release_the_guest_as_pause_does(launcher, nova_for):
    user, _ = launcher
    nova = nova_for(user)
    server_id = create(nova).json()["server"]["id"]
    run_jobs()
    action = f"{V}/servers/{server_id}/action"

    suspended = nova.post(action, {"suspend": None}, format="json")
    held = [job.kind for job in run_jobs()]
    status_held = nova_get(nova, f"{V}/servers/{server_id}")["server"]["status"]
    again = nova.post(action, {"suspend": None}, format="json")
    resumed = nova.post(action, {"resume": None}, format="json")
    released = [job.kind for job in run_jobs()]
    status_released = nova_get(nova, f"{V}/servers/{server_id}")["server"]["status"]
    not_held = nova.post(action, {"resume": None}, format="json")

    assert (suspended.status_code, resumed.status_code) == (202, 202)
    assert (held, status_held) == (["suspend"], "PAUSED")
    assert (released, status_released) == (["resume"], "ACTIVE")
    assert again.status_code == not_held.status_code == 409
    assert again.json()["conflictingRequest"]["message"].startswith(
        f"Cannot 'suspend' instance {server_id} while it is in vm_state paused"
    )
    assert not_held.json()["conflictingRequest"]["message"].startswith(
        f"Cannot 'resume' instance {server_id} while it is in vm_state active"
    )


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ({"lock": None}, "Corral does not lock servers ('lock'): who may stop, change or"),
        ({"shelve": None}, "Corral does not shelve servers ('shelve'): stop it (os-stop)"),
        ({"resize": {"flavorRef": "m1.small"}}, "Corral does not resize servers ('resize')"),
        ({"os-migrateLive": {"host": None}}, "Corral does not migrate servers through Nova's"),
        ({"os-getSerialConsole": {"type": "serial"}}, "Corral does not open serial consoles"),
    ],
)
def test_an_action_of_novas_that_corral_does_not_take_is_a_400_saying_what_instead(
    launcher, nova_for, action, message
):
    user, _ = launcher
    nova = nova_for(user)
    server_id = create(nova).json()["server"]["id"]
    jobs_before = Job.objects.count()

    refused = nova.post(f"{V}/servers/{server_id}/action", action, format="json")

    assert refused.status_code == 400
    assert refused.json()["badRequest"]["message"].startswith(message)
    assert Job.objects.count() == jobs_before


def test_the_console_log_and_a_novnc_url_on_a_one_time_ticket(launcher, nova_for, client):
    user, _ = launcher
    nova = nova_for(user)
    server_id = create(nova).json()["server"]["id"]
    run_jobs()
    vm = VirtualMachine.objects.get(uuid=server_id)
    ConsoleLog.objects.create(vm=vm, text="line one\nline two\nlogin: ", size=24)
    VirtualMachine.objects.filter(pk=vm.pk).update(graphics_port=5901)
    action = f"{V}/servers/{server_id}/action"

    log = nova.post(action, {"os-getConsoleOutput": {"length": 2}}, format="json")
    console = nova.post(action, {"os-getVNCConsole": {"type": "novnc"}}, format="json")
    remote = nova.post(
        f"{V}/servers/{server_id}/remote-consoles",
        {"remote_console": {"protocol": "vnc", "type": "novnc"}},
        format="json",
        HTTP_OPENSTACK_API_VERSION="compute 2.6",
    )

    assert log.json() == {"output": "line two\nlogin: "}
    url = console.json()["console"]["url"]
    assert url.startswith("http://testserver/console/?token=")
    assert remote.json()["remote_console"]["url"].startswith("http://testserver/console/?token=")
    page = client.get(url.removeprefix("http://testserver"))
    assert page.status_code == 200
    assert 'data-url="ws://testserver/ws/console/' in page.content.decode()
    assert ConsoleTicket.objects.filter(vm=vm, user=user, used_at__isnull=True).count() == 2
    assert client.get("/console/?token=forged").status_code == 404


def test_deleting_a_running_server_powers_it_off_then_removes_it(launcher, nova_for):
    user, _ = launcher
    nova = nova_for(user)
    server_id = create(nova).json()["server"]["id"]
    run_jobs()

    deleted = nova.delete(f"{V}/servers/{server_id}")
    deleting = nova_get(nova, f"{V}/servers/{server_id}")["server"]
    ran = [job.kind for job in run_jobs()]
    gone = nova.get(f"{V}/servers/{server_id}")

    assert deleted.status_code == 204
    assert deleting["OS-EXT-STS:task_state"] == "deleting"
    assert ran == ["poweroff", "delete"]
    assert gone.status_code == 404
    assert not Server.objects.exists()


def test_an_admin_lists_every_project_with_all_tenants_and_a_user_may_not(
    launcher, nova_for, admin_user
):
    user, _ = launcher
    server_id = create(nova_for(user)).json()["server"]["id"]

    own = nova_get(nova_for(admin_user), f"{V}/servers")["servers"]
    everyone = nova_get(nova_for(admin_user), f"{V}/servers/detail?all_tenants=1")["servers"]
    refused = nova_for(user).get(f"{V}/servers?all_tenants=1")

    assert own == []
    assert [server["id"] for server in everyone] == [server_id]
    assert everyone[0]["OS-EXT-SRV-ATTR:host"] is None  # not placed yet
    assert refused.status_code == 403


def test_servers_launch_into_a_reservation_and_one_beyond_it_goes_to_error(
    sim_cluster, nova_for, lease_user, make_lease, make_template, grant
):
    Host.objects.filter(cluster=sim_cluster).update(reservable=True)
    owner = lease_user()
    grant(owner, "PowerUser", sim_cluster)
    make_template("tiny", cluster=sim_cluster, vcpus=1, memory_mb=128, disk_gb=1)
    lease = make_lease(at(10), at(12), instances(1, vcpus=1, memory_mb=128), owner=owner)
    reservation = lease.reservations.get()
    nova = nova_for(owner)

    with time_machine.travel(at(10, 0), tick=False):
        lifecycle.start_lease(lease)
        first = create(nova, flavorRef=str(reservation.pk), name="in")
        beyond = create(nova, flavorRef=str(reservation.pk), name="beyond")
        error = nova_get(nova, f"{V}/servers/{beyond.json()['server']['id']}")["server"]

    assert (first.status_code, beyond.status_code) == (202, 202)
    vm = VirtualMachine.objects.get(uuid=first.json()["server"]["id"])
    assert (vm.reservation_id, vm.vcpus, vm.memory_mb) == (reservation.pk, 1, 128)
    assert error["status"] == "ERROR"
    assert error["fault"]["message"] == "The reservation's only instance is launched."
    assert VirtualMachine.objects.count() == 1

    removed = nova.delete(f"{V}/servers/{error['id']}")
    assert removed.status_code == 204
    assert nova.get(f"{V}/servers/{error['id']}").status_code == 404


def test_a_pool_user_sees_the_pools_flavor_and_image_and_is_handed_its_vm(
    sim_cluster, nova_for, make_user, make_template, make_pool, make_image, grant
):
    image = make_image(name="pool-disk")
    template = make_template("ci.node", cluster=sim_cluster, memory_mb=128, disk_gb=1)
    template.disk_image = image
    template.save()
    make_template("not-theirs", cluster=sim_cluster)
    pool = make_pool(cluster=sim_cluster, template=template, size=1, prestarted_vms=1)
    [running] = add_pool_vms(pool, [VmStatus.UP])
    user = make_user()
    grant(user, "UserRole", pool)  # no grant on templates, images or the cluster
    nova = nova_for(user)

    flavors = nova_get(nova, f"{V}/flavors")["flavors"]
    images = nova_get(nova, "/image/v2/images")["images"]
    created = create(nova, flavorRef="ci.node", imageRef=str(image.uuid), name="job-1")

    assert [flavor["id"] for flavor in flavors] == ["ci.node"]
    assert [found["id"] for found in images] == [str(image.uuid)]
    assert created.json()["server"]["id"] == str(running.uuid)
    running.refresh_from_db()
    assert running.owner_id == user.pk


def test_a_lease_owner_sees_the_images_every_cluster_shares(
    nova_for, make_lease, lease_user, reservable_hosts, make_image
):
    reservable_hosts(1)
    owner, stranger = lease_user(), lease_user()
    make_lease(at(10), at(12), instances(1), owner=owner)
    image = make_image(name="shared-disk")

    owners = nova_get(nova_for(owner), "/image/v2/images")["images"]
    strangers = nova_get(nova_for(stranger), "/image/v2/images")["images"]

    assert [found["id"] for found in owners] == [str(image.uuid)]
    assert strangers == []


def test_a_server_no_host_may_run_goes_to_error_with_the_schedulers_reason(
    sim_cluster, launcher, nova_for
):
    user, _ = launcher
    Host.objects.filter(cluster=sim_cluster).update(reservable=True)  # all reserved for leases
    nova = nova_for(user)

    created = create(nova, name="squeezed")
    [start] = run_jobs()
    shown = nova_get(nova, f"{V}/servers/{created.json()['server']['id']}")["server"]

    assert created.status_code == 202
    assert start.state == JobState.FAILED
    assert shown["status"] == "ERROR"
    assert shown["fault"]["code"] == 500
    assert shown["fault"]["message"].startswith("No host can run squeezed in cluster")
    assert "reserved for leases" in shown["fault"]["message"]


def test_metadata_is_read_merged_replaced_and_deleted_item_by_item(launcher, nova_for):
    user, _ = launcher
    nova = nova_for(user)
    server_id = create(nova, metadata={"role": "web"}).json()["server"]["id"]
    base = f"{V}/servers/{server_id}/metadata"

    merged = nova.post(base, {"metadata": {"tier": "gold"}}, format="json")
    item = nova.put(f"{base}/owner", {"meta": {"owner": "ops"}}, format="json")
    mismatch = nova.put(f"{base}/owner", {"meta": {"other": "x"}}, format="json")
    one = nova_get(nova, f"{base}/tier")
    removed = nova.delete(f"{base}/role")
    after_delete = nova_get(nova, base)["metadata"]
    replaced = nova.put(base, {"metadata": {"only": "this"}}, format="json")

    assert merged.json() == {"metadata": {"role": "web", "tier": "gold"}}
    assert item.json() == {"meta": {"owner": "ops"}}
    assert mismatch.status_code == 400
    assert one == {"meta": {"tier": "gold"}}
    assert removed.status_code == 204
    assert after_delete == {"tier": "gold", "owner": "ops"}
    assert replaced.json() == {"metadata": {"only": "this"}}
    assert nova_get(nova, f"{V}/servers/{server_id}")["server"]["metadata"] == {"only": "this"}
    assert nova.get(f"{base}/role").status_code == 404


def test_metadata_of_a_vm_made_in_corral_and_its_addresses(
    sim_vm, nova_for, make_user, grant, make_role
):
    vm = sim_vm(status="up", ip_addresses=["192.0.2.7"])
    user = make_user()
    grant(user, "UserVmManager", vm)
    viewer = make_user()
    grant(viewer, make_role("Viewer", ["hosts.view_virtualmachine"]).name, vm)
    base = f"{V}/servers/{vm.uuid}"

    ips = nova_get(nova_for(user), f"{base}/ips")["addresses"]
    set_meta = nova_for(user).post(f"{base}/metadata", {"metadata": {"a": "b"}}, format="json")
    refused = nova_for(viewer).post(f"{base}/metadata", {"metadata": {"c": "d"}}, format="json")
    shown = nova_get(nova_for(user), base)["server"]

    assert [address["addr"] for address in next(iter(ips.values()))] == ["192.0.2.7"]
    assert set_meta.json() == {"metadata": {"a": "b"}}
    assert refused.status_code == 403
    assert (shown["name"], shown["metadata"]) == (vm.name, {"a": "b"})


def test_a_server_names_its_network_before_its_guest_shows_an_address(launcher, nova_for):
    user, _ = launcher
    nova = nova_for(user)
    server_id = create(nova).json()["server"]["id"]
    run_jobs()

    active = nova_get(nova, f"{V}/servers/{server_id}")["server"]
    ips = nova_get(nova, f"{V}/servers/{server_id}/ips")["addresses"]

    # openstacksdk's create_server(wait=True), Ansible's server module among its users, deletes
    # an ACTIVE server without a network as a failed boot.
    assert active["status"] == "ACTIVE"
    assert active["addresses"] == ips == {"default": []}
    assert (active["accessIPv4"], active["accessIPv6"]) == ("", "")


def test_a_guest_on_a_network_is_accessed_at_its_addresses_and_a_user_mode_one_is_not(
    sim_cluster, make_vm, make_template, sim_vm, nova_for, make_user, grant
):
    on_network = make_vm(
        cluster=sim_cluster,
        template=make_template(networks=["lab"], memory_mb=128),
        status="up",
        ip_addresses=["fe80::5054:ff:fe00:1", "192.168.122.5/24", "2001:db8::5"],
    )
    user_mode = sim_vm(status="up", ip_addresses=["10.0.2.15"])
    user = make_user()
    for vm in (on_network, user_mode):
        grant(user, "UserVmManager", vm)

    reached = nova_get(nova_for(user), f"{V}/servers/{on_network.uuid}")["server"]
    unreached = nova_get(nova_for(user), f"{V}/servers/{user_mode.uuid}")["server"]

    # openstacksdk takes accessIPv4 for the server's public address: with none, it would ask
    # for a floating IP (Corral has none) for a server that shows a private one.
    assert (reached["accessIPv4"], reached["accessIPv6"]) == ("192.168.122.5", "2001:db8::5")
    assert [address["addr"] for address in reached["addresses"]["lab"]] == [
        "fe80::5054:ff:fe00:1",
        "192.168.122.5",
        "2001:db8::5",
    ]
    assert (unreached["accessIPv4"], unreached["accessIPv6"]) == ("", "")
    assert [address["addr"] for address in unreached["addresses"]["default"]] == ["10.0.2.15"]


@pytest.mark.parametrize(
    ("name", "found"),
    [
        ("web", ["web-1", "web-10", "old-web"]),
        ("^web", ["web-1", "web-10"]),
        ("^web-1$", ["web-1"]),
        ("b.1", ["web-1", "web-10"]),
        ("(a+)+$", []),  # no backtracking: the characters stand for themselves
    ],
)
def test_the_name_filter_takes_novas_anchors_and_any_character(launcher, nova_for, name, found):
    user, _ = launcher
    nova = nova_for(user)
    for server in ("web-1", "web-10", "old-web"):
        create(nova, name=server)

    listed = nova_get(nova, f"{V}/servers?name={quote(name)}")["servers"]

    assert sorted(server["name"] for server in listed) == sorted(found)


def test_a_server_boots_its_owners_private_image_and_another_user_cannot_name_it(
    launcher, nova_for, make_user, grant, sim_cluster, make_image
):
    user, _ = launcher
    other = make_user()
    grant(other, "PowerUser", sim_cluster)
    image = make_image(name="alices-disk", owner=user, visibility="private")

    made = create(nova_for(user), imageRef=str(image.uuid))
    refused = create(nova_for(other), imageRef=str(image.uuid), name="theirs")

    assert made.status_code == 202, made.content
    vm = VirtualMachine.objects.get(uuid=made.json()["server"]["id"])
    assert vm.disk_image_id == image.pk
    assert refused.status_code == 400
    assert f"Image {image.uuid} could not be found." in refused.json()["badRequest"]["message"]
    assert VirtualMachine.objects.count() == 1


def test_a_users_template_is_a_flavor_they_boot_while_they_see_its_image(
    launcher, nova_for, make_user, grant, sim_cluster, make_image, make_template
):
    user, _ = launcher
    other = make_user()
    grant(other, "PowerUser", sim_cluster)
    shared = make_image(name="carols-disk", owner=make_user(), visibility="shared")
    membership = ImageMember.objects.create(image=shared, user=user, status="accepted")
    make_template("mine", cluster=sim_cluster, owner=user, visibility="private", disk_image=shared)

    made = create(nova_for(user), flavorRef="mine")
    not_theirs = create(nova_for(other), flavorRef="mine", name="theirs")
    membership.delete()
    unshared = create(nova_for(user), flavorRef="mine", name="again")

    assert made.status_code == 202, made.content
    assert not_theirs.status_code == 400
    assert "Flavor mine could not be found." in not_theirs.json()["badRequest"]["message"]
    assert unshared.status_code == 400
    assert (
        "Template mine boots from an image you may not see (its owner no longer shares it with "
        "you)" in unshared.json()["badRequest"]["message"]
    )
    assert VirtualMachine.objects.count() == 1


def test_a_server_is_in_no_security_group_and_another_users_is_not_found(
    sim_vm, nova_for, make_user, grant
):
    vm = sim_vm(status="up")
    holder, stranger = make_user(), make_user()
    grant(holder, "UserVmManager", vm)
    base = f"{V}/servers/{vm.uuid}"

    groups = nova_for(holder).get(f"{base}/os-security-groups")
    hidden = nova_for(stranger).get(f"{base}/os-security-groups")
    shown = nova_get(nova_for(holder), base)["server"]

    # Corral filters no guest's traffic by groups: none is named, in the list or on the server
    # (Nova leaves the key out for a server in none), so a tool reconciling groups finds none.
    assert (groups.status_code, groups.json()) == (200, {"security_groups": []})
    assert "security_groups" not in shown
    assert hidden.status_code == 404

"""The inventory API (clusters, hosts, templates, VMs) as a superuser and as scoped admins."""

import pytest

from hosts.models import Cluster, Host, Template, VirtualMachine, VmStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser_client(admin_user, client_for):
    return client_for(admin_user)


@pytest.fixture
def cluster_a(make_cluster):
    return make_cluster("cluster-a")


@pytest.fixture
def cluster_b(make_cluster):
    return make_cluster("cluster-b")


@pytest.fixture
def cluster_admin(make_user, grant, cluster_a):
    """A user who is ClusterAdmin of cluster A only."""
    user = make_user("alice")
    grant(user, "ClusterAdmin", cluster_a)
    return user


@pytest.fixture
def cluster_admin_client(cluster_admin, client_for):
    return client_for(cluster_admin)


def host_body(cluster, name="kvm1", **extra):
    return {
        "name": name,
        "cluster": cluster.pk,
        "uri": f"qemu+ssh://root@{name}.example.org/system",
        **extra,
    }


# --- Clusters ---------------------------------------------------------------------------------


def test_superuser_creates_a_cluster(superuser_client):
    response = superuser_client.post(
        "/api/clusters/", {"name": "lab", "description": "The lab"}, format="json"
    )

    assert response.status_code == 201, response.json()
    assert response.json()["name"] == "lab"
    assert Cluster.objects.get(pk=response.json()["id"]).description == "The lab"


def test_superuser_lists_every_cluster_with_host_and_vm_counts(
    superuser_client, cluster_a, cluster_b, make_host, make_vm
):
    make_host(cluster_a)
    make_host(cluster_a)
    make_vm(cluster_b)

    response = superuser_client.get("/api/clusters/")

    assert response.status_code == 200
    rows = {row["name"]: row for row in response.json()["results"]}
    assert set(rows) == {"cluster-a", "cluster-b"}
    assert (rows["cluster-a"]["host_count"], rows["cluster-a"]["vm_count"]) == (2, 0)
    assert (rows["cluster-b"]["host_count"], rows["cluster-b"]["vm_count"]) == (0, 1)


def test_superuser_renames_a_cluster(superuser_client, cluster_a):
    response = superuser_client.patch(
        f"/api/clusters/{cluster_a.pk}/", {"name": "renamed"}, format="json"
    )

    assert response.status_code == 200, response.json()
    cluster_a.refresh_from_db()
    assert cluster_a.name == "renamed"


def test_superuser_deletes_an_empty_cluster(superuser_client, cluster_a):
    response = superuser_client.delete(f"/api/clusters/{cluster_a.pk}/")

    assert response.status_code == 204
    assert not Cluster.objects.filter(pk=cluster_a.pk).exists()


def test_deleting_a_cluster_with_hosts_is_409_naming_them_and_deletes_nothing(
    superuser_client, cluster_a, make_host
):
    make_host(cluster_a, name="kvm-one")
    make_host(cluster_a, name="kvm-two")

    response = superuser_client.delete(f"/api/clusters/{cluster_a.pk}/")

    assert response.status_code == 409
    detail = response.json()["detail"]
    assert "kvm-one" in detail and "kvm-two" in detail
    assert Cluster.objects.filter(pk=cluster_a.pk).exists()
    assert Host.objects.filter(cluster=cluster_a).count() == 2


def test_cluster_admin_sees_only_their_cluster(cluster_admin_client, cluster_a, cluster_b):
    response = cluster_admin_client.get("/api/clusters/")

    assert response.status_code == 200
    assert [row["name"] for row in response.json()["results"]] == ["cluster-a"]


def test_cluster_admin_gets_404_on_another_cluster(cluster_admin_client, cluster_b):
    response = cluster_admin_client.get(f"/api/clusters/{cluster_b.pk}/")

    assert response.status_code == 404


def test_cluster_admin_changes_their_cluster(cluster_admin_client, cluster_a):
    response = cluster_admin_client.patch(
        f"/api/clusters/{cluster_a.pk}/", {"description": "Ours"}, format="json"
    )

    assert response.status_code == 200, response.json()
    cluster_a.refresh_from_db()
    assert cluster_a.description == "Ours"


def test_cluster_admin_of_one_cluster_cannot_create_clusters(cluster_admin_client):
    response = cluster_admin_client.post("/api/clusters/", {"name": "mine"}, format="json")

    assert response.status_code == 403
    assert not Cluster.objects.filter(name="mine").exists()


def test_cluster_admin_deletes_their_empty_cluster(cluster_admin_client, cluster_a):
    response = cluster_admin_client.delete(f"/api/clusters/{cluster_a.pk}/")

    assert response.status_code == 204
    assert not Cluster.objects.filter(pk=cluster_a.pk).exists()


def test_system_cluster_admin_creates_clusters(make_user, grant, client_for):
    user = make_user()
    grant(user, "ClusterAdmin")

    response = client_for(user).post("/api/clusters/", {"name": "new-one"}, format="json")

    assert response.status_code == 201, response.json()
    assert Cluster.objects.filter(name="new-one").exists()


# --- Hosts ------------------------------------------------------------------------------------


def test_superuser_creates_a_host(superuser_client, cluster_a):
    response = superuser_client.post(
        "/api/hosts/", host_body(cluster_a, networks=["default"]), format="json"
    )

    assert response.status_code == 201, response.json()
    host = Host.objects.get(pk=response.json()["id"])
    assert (host.name, host.cluster, host.networks) == ("kvm1", cluster_a, ["default"])
    assert host.status == "connecting"


def test_superuser_retrieves_a_host(superuser_client, make_host, cluster_a):
    host = make_host(cluster_a, name="kvm9")

    response = superuser_client.get(f"/api/hosts/{host.pk}/")

    assert response.status_code == 200
    assert response.json()["name"] == "kvm9"
    assert response.json()["cluster"] == cluster_a.pk


def test_superuser_updates_a_host_with_put(superuser_client, make_host, cluster_a):
    host = make_host(cluster_a, name="kvm9")
    body = host_body(cluster_a, name="kvm9", description="Rack 4", reservable=True)

    response = superuser_client.put(f"/api/hosts/{host.pk}/", body, format="json")

    assert response.status_code == 200, response.json()
    host.refresh_from_db()
    assert (host.description, host.reservable) == ("Rack 4", True)


def test_superuser_deletes_a_host_without_vms(superuser_client, make_host):
    host = make_host()

    response = superuser_client.delete(f"/api/hosts/{host.pk}/")

    assert response.status_code == 204
    assert not Host.objects.filter(pk=host.pk).exists()


def test_deleting_a_host_that_runs_vms_is_409(superuser_client, make_host, make_vm, cluster_a):
    host = make_host(cluster_a)
    make_vm(cluster_a, host=host, name="busy-vm")

    response = superuser_client.delete(f"/api/hosts/{host.pk}/")

    assert response.status_code == 409
    assert "busy-vm" in response.json()["detail"]
    assert Host.objects.filter(pk=host.pk).exists()


READ_ONLY_HOST_FIELDS = {
    "status": "up",
    "status_detail": "fine",
    "cpus": 64,
    "memory_mb": 512000,
    "cpu_usage_percent": 12.5,
    "memory_used_mb": 1000,
    "last_seen_at": "2024-01-01T00:00:00Z",
}


@pytest.mark.parametrize("field,value", READ_ONLY_HOST_FIELDS.items())
def test_host_capacity_and_status_fields_cannot_be_set_on_create(
    superuser_client, cluster_a, field, value
):
    response = superuser_client.post(
        "/api/hosts/", host_body(cluster_a, **{field: value}), format="json"
    )

    assert response.status_code == 201, response.json()
    host = Host.objects.get(pk=response.json()["id"])
    assert getattr(host, field) == Host._meta.get_field(field).get_default()
    assert response.json()[field] == getattr(host, field)


@pytest.mark.parametrize("field,value", READ_ONLY_HOST_FIELDS.items())
def test_host_capacity_and_status_fields_cannot_be_changed(
    superuser_client, make_host, field, value
):
    host = make_host()
    before = getattr(host, field)

    response = superuser_client.patch(f"/api/hosts/{host.pk}/", {field: value}, format="json")

    assert response.status_code == 200, response.json()
    host.refresh_from_db()
    assert getattr(host, field) == before


def test_cluster_admin_creates_a_host_in_their_cluster(cluster_admin_client, cluster_a):
    response = cluster_admin_client.post("/api/hosts/", host_body(cluster_a), format="json")

    assert response.status_code == 201, response.json()
    assert Host.objects.filter(cluster=cluster_a, name="kvm1").exists()


def test_cluster_admin_cannot_create_a_host_in_another_cluster(cluster_admin_client, cluster_b):
    response = cluster_admin_client.post("/api/hosts/", host_body(cluster_b), format="json")

    assert response.status_code == 400
    assert "cluster" in response.json()
    assert not Host.objects.exists()


def test_cluster_admin_lists_only_hosts_of_their_cluster(
    cluster_admin_client, make_host, cluster_a, cluster_b
):
    make_host(cluster_a, name="mine")
    make_host(cluster_b, name="theirs")

    response = cluster_admin_client.get("/api/hosts/")

    assert [row["name"] for row in response.json()["results"]] == ["mine"]


def test_cluster_admin_gets_404_on_a_host_of_another_cluster(
    cluster_admin_client, make_host, cluster_b
):
    host = make_host(cluster_b)

    assert cluster_admin_client.get(f"/api/hosts/{host.pk}/").status_code == 404
    assert cluster_admin_client.delete(f"/api/hosts/{host.pk}/").status_code == 404
    assert Host.objects.filter(pk=host.pk).exists()


def test_cluster_admin_deletes_a_host_of_their_cluster(cluster_admin_client, make_host, cluster_a):
    host = make_host(cluster_a)

    response = cluster_admin_client.delete(f"/api/hosts/{host.pk}/")

    assert response.status_code == 204
    assert not Host.objects.filter(pk=host.pk).exists()


def test_cluster_admin_cannot_move_a_host_into_a_cluster_they_do_not_see(
    cluster_admin_client, make_host, cluster_a, cluster_b
):
    host = make_host(cluster_a)

    response = cluster_admin_client.patch(
        f"/api/hosts/{host.pk}/", {"cluster": cluster_b.pk}, format="json"
    )

    assert response.status_code == 400
    assert "cluster" in response.json()
    host.refresh_from_db()
    assert host.cluster == cluster_a


def test_moving_a_host_without_vms_to_another_cluster_works(
    superuser_client, make_host, cluster_a, cluster_b
):
    host = make_host(cluster_a)

    response = superuser_client.patch(
        f"/api/hosts/{host.pk}/", {"cluster": cluster_b.pk}, format="json"
    )

    assert response.status_code == 200, response.json()
    host.refresh_from_db()
    assert host.cluster == cluster_b


def test_moving_a_host_with_vms_to_another_cluster_is_400(
    superuser_client, make_host, make_vm, cluster_a, cluster_b
):
    host = make_host(cluster_a)
    make_vm(cluster_a, host=host)

    response = superuser_client.patch(
        f"/api/hosts/{host.pk}/", {"cluster": cluster_b.pk}, format="json"
    )

    assert response.status_code == 400
    assert "cluster" in response.json()
    host.refresh_from_db()
    assert host.cluster == cluster_a


# --- Templates --------------------------------------------------------------------------------


def test_superuser_creates_a_shared_template(superuser_client):
    body = {"name": "debian", "vcpus": 2, "memory_mb": 2048, "disk_gb": 20, "os_type": "linux"}

    response = superuser_client.post("/api/templates/", body, format="json")

    assert response.status_code == 201, response.json()
    template = Template.objects.get(pk=response.json()["id"])
    assert (template.cluster, template.vcpus, template.memory_mb, template.disk_gb) == (
        None,
        2,
        2048,
        20,
    )


def test_superuser_updates_and_deletes_a_template(superuser_client, make_template):
    template = make_template()

    changed = superuser_client.patch(f"/api/templates/{template.pk}/", {"vcpus": 4}, format="json")
    deleted = superuser_client.delete(f"/api/templates/{template.pk}/")

    assert changed.status_code == 200, changed.json()
    assert changed.json()["vcpus"] == 4
    assert deleted.status_code == 204
    assert not Template.objects.filter(pk=template.pk).exists()


def test_deleting_a_template_used_by_a_vm_is_409(superuser_client, make_template, make_vm):
    template = make_template()
    make_vm(template=template, name="child")

    response = superuser_client.delete(f"/api/templates/{template.pk}/")

    assert response.status_code == 409
    assert "child" in response.json()["detail"]
    assert Template.objects.filter(pk=template.pk).exists()


def test_cluster_admin_creates_a_template_in_their_cluster(cluster_admin_client, cluster_a):
    response = cluster_admin_client.post(
        "/api/templates/", {"name": "a-only", "cluster": cluster_a.pk}, format="json"
    )

    assert response.status_code == 201, response.json()
    assert Template.objects.get(name="a-only").cluster == cluster_a


def test_cluster_admin_sees_their_clusters_and_shared_templates_only(
    cluster_admin_client, make_template, cluster_a, cluster_b
):
    make_template("in-a", cluster=cluster_a)
    make_template("in-b", cluster=cluster_b)
    make_template("shared")

    response = cluster_admin_client.get("/api/templates/")

    assert sorted(row["name"] for row in response.json()["results"]) == ["in-a", "shared"]


def test_cluster_admin_gets_404_on_a_template_of_another_cluster(
    cluster_admin_client, make_template, cluster_b
):
    template = make_template(cluster=cluster_b)

    response = cluster_admin_client.patch(
        f"/api/templates/{template.pk}/", {"vcpus": 8}, format="json"
    )

    assert response.status_code == 404
    template.refresh_from_db()
    assert template.vcpus == 1


def test_binding_a_shared_template_used_in_another_cluster_is_400(
    superuser_client, make_template, make_vm, cluster_a, cluster_b
):
    template = make_template()
    make_vm(cluster_b, template, name="vm-in-b")

    response = superuser_client.patch(
        f"/api/templates/{template.pk}/", {"cluster": cluster_a.pk}, format="json"
    )

    assert response.status_code == 400
    assert "vm-in-b" in " ".join(response.json()["cluster"])
    template.refresh_from_db()
    assert template.cluster is None


def test_binding_a_template_used_by_a_pool_of_another_cluster_is_400(
    superuser_client, make_template, make_pool, cluster_a, cluster_b
):
    template = make_template()
    make_pool(cluster_b, template, name="pool-in-b")

    response = superuser_client.patch(
        f"/api/templates/{template.pk}/", {"cluster": cluster_a.pk}, format="json"
    )

    assert response.status_code == 400
    assert "pool-in-b" in " ".join(response.json()["cluster"])
    template.refresh_from_db()
    assert template.cluster is None


def test_binding_a_shared_template_to_the_cluster_of_its_vms_works(
    superuser_client, make_template, make_vm, cluster_a
):
    template = make_template()
    make_vm(cluster_a, template)

    response = superuser_client.patch(
        f"/api/templates/{template.pk}/", {"cluster": cluster_a.pk}, format="json"
    )

    assert response.status_code == 200, response.json()
    template.refresh_from_db()
    assert template.cluster == cluster_a


# --- VMs --------------------------------------------------------------------------------------


def test_superuser_creates_a_vm(superuser_client, cluster_a, make_template):
    template = make_template(vcpus=2, memory_mb=2048, disk_gb=20)

    response = superuser_client.post(
        "/api/vms/",
        {"name": "web1", "cluster": cluster_a.pk, "template": template.pk},
        format="json",
    )

    assert response.status_code == 201, response.json()
    vm = VirtualMachine.objects.get(pk=response.json()["id"])
    assert (vm.name, vm.cluster, vm.template, vm.status) == ("web1", cluster_a, template, "down")
    assert response.json()["owner"] == "root-admin"


def test_vm_takes_its_hardware_from_the_template_unless_given(
    superuser_client, cluster_a, make_template
):
    template = make_template(vcpus=2, memory_mb=2048, disk_gb=20)

    response = superuser_client.post(
        "/api/vms/",
        {"name": "web1", "cluster": cluster_a.pk, "template": template.pk, "memory_mb": 4096},
        format="json",
    )

    assert response.status_code == 201, response.json()
    vm = VirtualMachine.objects.get(pk=response.json()["id"])
    assert (vm.vcpus, vm.memory_mb, vm.disk_gb) == (2, 4096, 20)


def test_superuser_lists_and_retrieves_vms(superuser_client, make_vm, cluster_a, cluster_b):
    vm = make_vm(cluster_a, name="one")
    make_vm(cluster_b, name="two")

    listed = superuser_client.get("/api/vms/")
    retrieved = superuser_client.get(f"/api/vms/{vm.pk}/")

    assert sorted(row["name"] for row in listed.json()["results"]) == ["one", "two"]
    assert retrieved.status_code == 200
    assert retrieved.json()["uuid"] == str(vm.uuid)


def test_superuser_changes_the_hardware_of_a_vm_that_is_down(superuser_client, make_vm):
    vm = make_vm(vcpus=1)

    response = superuser_client.patch(f"/api/vms/{vm.pk}/", {"vcpus": 4}, format="json")

    assert response.status_code == 200, response.json()
    vm.refresh_from_db()
    assert vm.vcpus == 4


def test_superuser_deletes_a_vm_that_is_down(superuser_client, make_vm):
    vm = make_vm()

    response = superuser_client.delete(f"/api/vms/{vm.pk}/")

    assert response.status_code == 204
    assert not VirtualMachine.objects.filter(pk=vm.pk).exists()


@pytest.mark.parametrize("field,value", [("vcpus", 8), ("memory_mb", 8192), ("disk_gb", 99)])
@pytest.mark.parametrize("status", [VmStatus.UP, VmStatus.PAUSED, VmStatus.STARTING])
def test_changing_the_hardware_of_a_vm_that_is_not_down_is_400_naming_the_field(
    superuser_client, make_vm, status, field, value
):
    vm = make_vm(status=status)
    before = getattr(vm, field)

    response = superuser_client.patch(f"/api/vms/{vm.pk}/", {field: value}, format="json")

    assert response.status_code == 400
    assert list(response.json()) == [field]
    vm.refresh_from_db()
    assert getattr(vm, field) == before


def test_a_running_vm_may_still_be_renamed(superuser_client, make_vm):
    vm = make_vm(status=VmStatus.UP)

    response = superuser_client.patch(
        f"/api/vms/{vm.pk}/", {"name": "renamed", "vcpus": vm.vcpus}, format="json"
    )

    assert response.status_code == 200, response.json()
    vm.refresh_from_db()
    assert vm.name == "renamed"


def test_deleting_a_vm_that_is_up_is_409_and_keeps_it(superuser_client, make_vm):
    vm = make_vm(status=VmStatus.UP, name="running")

    response = superuser_client.delete(f"/api/vms/{vm.pk}/")

    assert response.status_code == 409
    assert "running" in response.json()["detail"]
    assert VirtualMachine.objects.filter(pk=vm.pk).exists()


@pytest.mark.parametrize("field", ["cluster", "template"])
def test_vm_cluster_and_template_cannot_change_after_create(
    superuser_client, make_vm, make_template, cluster_a, cluster_b, field
):
    vm = make_vm(cluster_a)
    other = {"cluster": cluster_b.pk, "template": make_template().pk}[field]
    before = getattr(vm, f"{field}_id")

    response = superuser_client.patch(f"/api/vms/{vm.pk}/", {field: other}, format="json")

    assert response.status_code == 200, response.content  # a fixed field is ignored, not refused
    assert response.json()[field] == before
    vm.refresh_from_db()
    assert getattr(vm, f"{field}_id") == before


def test_template_of_one_cluster_cannot_make_a_vm_in_another(
    superuser_client, make_template, cluster_a, cluster_b
):
    template = make_template(cluster=cluster_a)

    response = superuser_client.post(
        "/api/vms/",
        {"name": "stray", "cluster": cluster_b.pk, "template": template.pk},
        format="json",
    )

    assert response.status_code == 400
    assert "template" in response.json()
    assert not VirtualMachine.objects.exists()


def test_template_of_a_cluster_makes_vms_in_that_cluster(
    superuser_client, make_template, cluster_a
):
    template = make_template(cluster=cluster_a)

    response = superuser_client.post(
        "/api/vms/",
        {"name": "local", "cluster": cluster_a.pk, "template": template.pk},
        format="json",
    )

    assert response.status_code == 201, response.json()


def test_cluster_admin_creates_and_deletes_a_vm_in_their_cluster(
    cluster_admin_client, make_template, cluster_a
):
    template = make_template()

    created = cluster_admin_client.post(
        "/api/vms/",
        {"name": "vm-a", "cluster": cluster_a.pk, "template": template.pk},
        format="json",
    )
    deleted = cluster_admin_client.delete(f"/api/vms/{created.json()['id']}/")

    assert created.status_code == 201, created.json()
    assert deleted.status_code == 204
    assert not VirtualMachine.objects.exists()


def test_cluster_admin_cannot_create_a_vm_in_another_cluster(
    cluster_admin_client, make_template, cluster_b
):
    response = cluster_admin_client.post(
        "/api/vms/",
        {"name": "vm-b", "cluster": cluster_b.pk, "template": make_template().pk},
        format="json",
    )

    assert response.status_code == 400
    assert "cluster" in response.json()
    assert not VirtualMachine.objects.exists()


def test_cluster_admin_lists_only_vms_of_their_cluster(
    cluster_admin_client, make_vm, cluster_a, cluster_b
):
    make_vm(cluster_a, name="mine")
    make_vm(cluster_b, name="theirs")

    response = cluster_admin_client.get("/api/vms/")

    assert [row["name"] for row in response.json()["results"]] == ["mine"]


def test_cluster_admin_gets_404_on_a_vm_of_another_cluster(
    cluster_admin_client, make_vm, cluster_b
):
    vm = make_vm(cluster_b)

    assert cluster_admin_client.patch(f"/api/vms/{vm.pk}/", {"vcpus": 3}).status_code == 404
    assert cluster_admin_client.delete(f"/api/vms/{vm.pk}/").status_code == 404
    assert VirtualMachine.objects.filter(pk=vm.pk).exists()


# --- The creator of a VM owns it --------------------------------------------------------------


@pytest.fixture
def power_user(make_user, grant, cluster_a):
    user = make_user("paul")
    grant(user, "PowerUser", cluster_a)
    return user


@pytest.fixture
def created_vm(power_user, client_for, cluster_a, make_template):
    response = client_for(power_user).post(
        "/api/vms/",
        {"name": "pauls-vm", "cluster": cluster_a.pk, "template": make_template().pk},
        format="json",
    )
    assert response.status_code == 201, response.json()
    return VirtualMachine.objects.get(pk=response.json()["id"])


def test_the_creator_of_a_vm_becomes_its_owner(created_vm, power_user):
    assert created_vm.owner == power_user


def test_creating_a_vm_is_said_in_the_event_feed_to_its_creator_and_its_clusters_admin(
    power_user, cluster_admin, client_for, created_vm
):
    for reader in (power_user, cluster_admin):
        answer = client_for(reader).get("/api/events/", {"since": 0}).json()

        said = [(e["object_type"], e["object_id"], e["message"]) for e in answer["events"]]
        assert ("vm", created_vm.pk, "VM pauls-vm created by paul") in said, reader


def test_the_creator_of_a_vm_sees_it(created_vm, power_user, client_for):
    response = client_for(power_user).get("/api/vms/")

    assert [row["name"] for row in response.json()["results"]] == ["pauls-vm"]
    assert response.json()["results"][0]["owner"] == "paul"


def test_the_creator_of_a_vm_changes_it(created_vm, power_user, client_for):
    response = client_for(power_user).patch(
        f"/api/vms/{created_vm.pk}/", {"memory_mb": 4096}, format="json"
    )

    assert response.status_code == 200, response.json()
    created_vm.refresh_from_db()
    assert created_vm.memory_mb == 4096


def test_the_creator_of_a_vm_deletes_it(created_vm, power_user, client_for):
    response = client_for(power_user).delete(f"/api/vms/{created_vm.pk}/")

    assert response.status_code == 204
    assert not VirtualMachine.objects.filter(pk=created_vm.pk).exists()


def test_another_power_user_of_the_cluster_does_not_see_the_creators_vm(
    created_vm, make_user, grant, cluster_a, client_for
):
    other = make_user()
    grant(other, "PowerUser", cluster_a)

    response = client_for(other).get(f"/api/vms/{created_vm.pk}/")

    assert response.status_code == 404


def test_owner_field_cannot_be_set_by_the_caller(
    superuser_client, make_user, cluster_a, make_template
):
    someone = make_user("someone")

    response = superuser_client.post(
        "/api/vms/",
        {
            "name": "web1",
            "cluster": cluster_a.pk,
            "template": make_template().pk,
            "owner": someone.username,
        },
        format="json",
    )

    assert response.status_code == 201, response.json()
    assert VirtualMachine.objects.get(name="web1").owner.username == "root-admin"


def test_a_vm_shows_its_hosts_name_beside_its_id(
    superuser_client, make_host, make_vm, make_template, cluster_a
):
    host = make_host(cluster_a, name="kvm-rack-7")
    template = make_template("small", cluster=cluster_a)
    placed = make_vm(cluster_a, template, name="placed", host=host)
    make_vm(cluster_a, template, name="unplaced")

    shown = superuser_client.get(f"/api/vms/{placed.pk}/").json()
    listed = {vm["name"]: vm for vm in superuser_client.get("/api/vms/").json()["results"]}

    assert (shown["host"], shown["host_name"]) == (host.pk, "kvm-rack-7")
    assert (listed["unplaced"]["host"], listed["unplaced"]["host_name"]) == (None, None)

"""Bad input to the inventory API: a 400 naming the field, a clear message, and nothing stored."""

import pytest
from django.core.exceptions import ValidationError

from hosts.models import Cluster, Host, Template, VirtualMachine
from hosts.validators import validate_libvirt_uri, validate_network_names

pytestmark = pytest.mark.django_db

MAX_MEMORY_MB = 16 * 1024 * 1024
MAX_DISK_GB = 64 * 1024


@pytest.fixture
def api(admin_user, client_for):
    return client_for(admin_user)


@pytest.fixture
def cluster(make_cluster):
    return make_cluster("lab")


@pytest.fixture
def template(make_template):
    return make_template("base", vcpus=2, memory_mb=2048, disk_gb=20)


def messages(body: dict) -> str:
    """Every message in an error body, as one string to search."""
    return " ".join(
        " ".join(value) if isinstance(value, list) else str(value) for value in body.values()
    )


def vm_body(cluster, template, **extra):
    return {"name": "web1", "cluster": cluster.pk, "template": template.pk, **extra}


def host_body(cluster, **extra):
    body = {"name": "kvm1", "cluster": cluster.pk, "uri": "qemu+ssh://root@kvm1/system"}
    return {**body, **extra}


# --- Sizes: CPUs, memory, disk -----------------------------------------------------------------

BAD_SIZES = [
    ("memory_mb", 0),
    ("memory_mb", -1),
    ("memory_mb", 15),
    ("memory_mb", MAX_MEMORY_MB + 1),
    ("memory_mb", 10**30),
    ("vcpus", 0),
    ("vcpus", -2),
    ("vcpus", 513),
    ("vcpus", 2**63),
    ("disk_gb", 0),
    ("disk_gb", MAX_DISK_GB + 1),
    ("disk_gb", 10**30),
]

WRONG_TYPES = [
    ("vcpus", "two"),
    ("vcpus", ""),
    ("vcpus", 2.5),
    ("vcpus", True),
    ("vcpus", [2]),
    ("memory_mb", "lots"),
    ("memory_mb", {"mb": 1024}),
    ("disk_gb", "20GB"),
]


@pytest.mark.parametrize("field,value", BAD_SIZES + WRONG_TYPES)
def test_vm_with_a_bad_size_is_400_on_that_field_and_not_stored(
    api, cluster, template, field, value
):
    response = api.post("/api/vms/", vm_body(cluster, template, **{field: value}), format="json")

    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert not VirtualMachine.objects.exists()


@pytest.mark.parametrize("field,value", BAD_SIZES + WRONG_TYPES)
def test_template_with_a_bad_size_is_400_on_that_field_and_not_stored(api, field, value):
    response = api.post("/api/templates/", {"name": "big", field: value}, format="json")

    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert not Template.objects.exists()


@pytest.mark.parametrize("field,value", BAD_SIZES + WRONG_TYPES)
def test_changing_a_vm_to_a_bad_size_is_400_and_changes_nothing(
    api, make_vm, cluster, template, field, value
):
    vm = make_vm(cluster, template)

    response = api.patch(f"/api/vms/{vm.pk}/", {field: value}, format="json")

    assert response.status_code == 400
    assert list(response.json()) == [field]
    vm.refresh_from_db()
    assert getattr(vm, field) == getattr(template, field)


@pytest.mark.parametrize("field,value", BAD_SIZES + WRONG_TYPES)
def test_changing_a_template_to_a_bad_size_is_400_and_changes_nothing(api, template, field, value):
    response = api.patch(f"/api/templates/{template.pk}/", {field: value}, format="json")

    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert Template.objects.filter(pk=template.pk, **{field: getattr(template, field)}).exists()


def test_smallest_and_largest_sizes_are_accepted(api, cluster, template):
    smallest = vm_body(cluster, template, name="small", vcpus=1, memory_mb=16, disk_gb=1)
    largest = vm_body(
        cluster, template, name="large", vcpus=512, memory_mb=MAX_MEMORY_MB, disk_gb=MAX_DISK_GB
    )

    assert api.post("/api/vms/", smallest, format="json").status_code == 201
    assert api.post("/api/vms/", largest, format="json").status_code == 201
    assert VirtualMachine.objects.count() == 2


def test_a_null_size_is_400(api):
    response = api.post("/api/templates/", {"name": "nothing", "vcpus": None}, format="json")

    assert response.status_code == 400
    assert list(response.json()) == ["vcpus"]


def test_a_vm_without_a_template_is_400_on_template(api, cluster):
    response = api.post("/api/vms/", {"name": "bare", "cluster": cluster.pk}, format="json")

    assert response.status_code == 400
    assert "template" in response.json()
    assert not VirtualMachine.objects.exists()


@pytest.mark.parametrize("field", ["cluster", "template"])
@pytest.mark.parametrize("value", [999999, "one", None])
def test_a_vm_with_a_bad_cluster_or_template_is_400_on_that_field(
    api, cluster, template, field, value
):
    body = {**vm_body(cluster, template), field: value}

    response = api.post("/api/vms/", body, format="json")

    assert response.status_code == 400
    assert field in response.json()
    assert not VirtualMachine.objects.exists()


# --- Names ------------------------------------------------------------------------------------

BAD_NAMES = [
    "",
    "two words",
    "bang!",
    "<b>bold</b>",
    "<script>alert(1)</script>",
    "a/b",
    "semi;colon",
    "-starts-with-dash",
    ".hidden",
    "x" * 65,
]


@pytest.fixture
def create_body(cluster, template):
    """How to create each kind of object, with a name to fill in."""

    def body(kind: str, name: str) -> dict:
        return {
            "clusters": {"name": name},
            "hosts": {**host_body(cluster), "name": name},
            "templates": {"name": name},
            "vms": vm_body(cluster, template, name=name),
        }[kind]

    return body


KINDS = {"clusters": Cluster, "hosts": Host, "templates": Template, "vms": VirtualMachine}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_bad_name_is_400_on_name_and_not_stored(api, create_body, kind, name):
    count_before = KINDS[kind].objects.count()

    response = api.post(f"/api/{kind}/", create_body(kind, name), format="json")

    assert response.status_code == 400
    assert list(response.json()) == ["name"]
    assert KINDS[kind].objects.count() == count_before


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["web1", "Web-1", "db_2", "a", "node.example", "9lives", "x" * 64])
def test_a_good_name_is_accepted(api, create_body, kind, name):
    response = api.post(f"/api/{kind}/", create_body(kind, name), format="json")

    assert response.status_code == 201, response.json()
    assert KINDS[kind].objects.filter(name=name).exists()


def test_renaming_a_vm_to_a_name_with_markup_is_400_and_keeps_the_name(api, make_vm):
    vm = make_vm(name="plain")

    response = api.patch(f"/api/vms/{vm.pk}/", {"name": "<i>x</i>"}, format="json")

    assert response.status_code == 400
    assert list(response.json()) == ["name"]
    vm.refresh_from_db()
    assert vm.name == "plain"


# --- Duplicate names --------------------------------------------------------------------------


def test_cluster_names_are_unique(api, cluster):
    response = api.post("/api/clusters/", {"name": "lab"}, format="json")

    assert response.status_code == 400
    assert "name" in response.json()
    assert Cluster.objects.filter(name="lab").count() == 1


def test_renaming_a_cluster_to_an_existing_name_is_400(api, cluster, make_cluster):
    other = make_cluster("other")

    response = api.patch(f"/api/clusters/{other.pk}/", {"name": "lab"}, format="json")

    assert response.status_code == 400
    assert "name" in response.json()
    other.refresh_from_db()
    assert other.name == "other"


def test_template_names_are_unique(api, template):
    response = api.post("/api/templates/", {"name": "base"}, format="json")

    assert response.status_code == 400
    assert "name" in response.json()
    assert Template.objects.filter(name="base").count() == 1


def test_template_names_are_unique_across_clusters(api, template, cluster):
    response = api.post("/api/templates/", {"name": "base", "cluster": cluster.pk}, format="json")

    assert response.status_code == 400
    assert Template.objects.filter(name="base").count() == 1


def test_host_names_are_unique_within_a_cluster(api, cluster, make_host):
    make_host(cluster, name="kvm1")

    response = api.post(
        "/api/hosts/", host_body(cluster, uri="qemu+ssh://root@other/system"), format="json"
    )

    assert response.status_code == 400
    assert "A host with this name exists in the cluster already." in messages(response.json())
    assert Host.objects.filter(name="kvm1").count() == 1


def test_the_same_host_name_is_fine_in_another_cluster(api, cluster, make_cluster, make_host):
    make_host(cluster, name="kvm1")
    other = make_cluster("other")

    response = api.post(
        "/api/hosts/", host_body(other, uri="qemu+ssh://root@other/system"), format="json"
    )

    assert response.status_code == 201, response.json()
    assert Host.objects.filter(name="kvm1").count() == 2


def test_moving_a_host_into_a_cluster_with_a_host_of_that_name_is_400(
    api, cluster, make_cluster, make_host
):
    make_host(cluster, name="kvm1", uri="qemu+ssh://root@first/system")
    other = make_cluster("other")
    moving = make_host(other, name="kvm1", uri="qemu+ssh://root@second/system")

    response = api.patch(f"/api/hosts/{moving.pk}/", {"cluster": cluster.pk}, format="json")

    assert response.status_code == 400
    moving.refresh_from_db()
    assert moving.cluster == other


def test_vm_names_are_unique_within_a_cluster(api, cluster, template, make_vm):
    make_vm(cluster, template, name="web1")

    response = api.post("/api/vms/", vm_body(cluster, template), format="json")

    assert response.status_code == 400
    assert "A VM with this name exists in the cluster already." in messages(response.json())
    assert VirtualMachine.objects.filter(name="web1").count() == 1


def test_the_same_vm_name_is_fine_in_another_cluster(api, cluster, template, make_cluster, make_vm):
    make_vm(cluster, template, name="web1")
    other = make_cluster("other")

    response = api.post("/api/vms/", vm_body(other, template), format="json")

    assert response.status_code == 201, response.json()
    assert VirtualMachine.objects.filter(name="web1").count() == 2


def test_renaming_a_vm_to_a_name_taken_in_its_cluster_is_400(api, cluster, template, make_vm):
    make_vm(cluster, template, name="web1")
    vm = make_vm(cluster, template, name="web2")

    response = api.patch(f"/api/vms/{vm.pk}/", {"name": "web1"}, format="json")

    assert response.status_code == 400
    vm.refresh_from_db()
    assert vm.name == "web2"


# --- libvirt URIs -----------------------------------------------------------------------------

GOOD_URIS = [
    "qemu:///system",
    "qemu:///session",
    "qemu+ssh://root@host/system",
    "qemu+tls://h:16514/system",
    "test:///default",
    "test+unix:///default?socket=/tmp/x/libvirt-sock",
    "qemu+libssh://corral@kvm1.example.org:2222/system?known_hosts=/srv/corral/known_hosts",
]

# URI -> a phrase the refusal must contain.
BAD_URIS = {
    "": "blank",
    "bogus": "Not a libvirt URI",
    "http://host/": "Corral does not open 'http' URIs",
    "qemu+smoke://h/system": "Unknown libvirt transport 'smoke'",
    "qemu+ssh://user:secret@h/system": "Do not put a password in the URI",
    "qemu+ssh://h": "needs a path",
    "qemu+ssh://h/": "needs a path",
    "qemu+ssh://h:70000/system": "port must be a number between 1 and 65535",
    "qemu+ssh://h:0/system": "port must be a number between 1 and 65535",
    "qemu+ssh://h:ssh/system": "port must be a number between 1 and 65535",
    "qemu+ssh://h/sys tem": "cannot contain spaces",
}


@pytest.mark.parametrize("uri", GOOD_URIS)
def test_a_host_with_a_libvirt_uri_is_created(api, cluster, uri):
    response = api.post("/api/hosts/", host_body(cluster, uri=uri), format="json")

    assert response.status_code == 201, response.json()
    assert Host.objects.get().uri == uri


@pytest.mark.parametrize("uri,phrase", BAD_URIS.items())
def test_a_host_with_a_bad_uri_is_400_with_a_clear_message(api, cluster, uri, phrase):
    response = api.post("/api/hosts/", host_body(cluster, uri=uri), format="json")

    assert response.status_code == 400
    assert list(response.json()) == ["uri"]
    assert phrase in " ".join(response.json()["uri"])
    assert not Host.objects.exists()


def test_a_uri_used_by_another_host_is_400(api, cluster, make_host):
    make_host(cluster, name="first", uri="qemu+ssh://root@kvm1/system")

    response = api.post(
        "/api/hosts/", host_body(cluster, name="second", uri="qemu+ssh://root@kvm1/system")
    )

    assert response.status_code == 400
    assert list(response.json()) == ["uri"]
    assert "already exists" in " ".join(response.json()["uri"])
    assert Host.objects.count() == 1


def test_changing_a_host_uri_to_a_bad_one_is_400_and_keeps_the_old(api, make_host):
    host = make_host(uri="qemu:///system")

    response = api.patch(
        f"/api/hosts/{host.pk}/", {"uri": "qemu+ssh://u:pw@h/system"}, format="json"
    )

    assert response.status_code == 400
    host.refresh_from_db()
    assert host.uri == "qemu:///system"


@pytest.mark.parametrize(
    "uri", GOOD_URIS + ["qemu+ssh://root@[::1]/system", "qemu+libssh2://h:2222/system"]
)
def test_validate_libvirt_uri_accepts(uri):
    validate_libvirt_uri(uri)


@pytest.mark.parametrize("uri,phrase", [(u, p) for u, p in BAD_URIS.items() if u])
def test_validate_libvirt_uri_refuses(uri, phrase):
    with pytest.raises(ValidationError) as refused:
        validate_libvirt_uri(uri)

    assert phrase in " ".join(refused.value.messages)


def test_validate_libvirt_uri_refuses_an_empty_uri():
    with pytest.raises(ValidationError):
        validate_libvirt_uri("")


# --- Networks ---------------------------------------------------------------------------------

BAD_NETWORKS = [
    "default",
    {"name": "default"},
    ["default", "default"],
    ["two words"],
    ["<b>net</b>"],
    [""],
    [None],
    [1],
    [["nested"]],
    ["n" * 65],
    ["-dash-first"],
]
GOOD_NETWORKS = [[], ["default"], ["default", "lab-net", "net_2.0", "N" * 64]]


@pytest.mark.parametrize("networks", BAD_NETWORKS)
def test_a_host_with_bad_networks_is_400_on_networks(api, cluster, networks):
    response = api.post("/api/hosts/", host_body(cluster, networks=networks), format="json")

    assert response.status_code == 400
    assert list(response.json()) == ["networks"]
    assert not Host.objects.exists()


@pytest.mark.parametrize("networks", BAD_NETWORKS)
def test_a_template_with_bad_networks_is_400_on_networks(api, networks):
    response = api.post("/api/templates/", {"name": "t", "networks": networks}, format="json")

    assert response.status_code == 400
    assert list(response.json()) == ["networks"]
    assert not Template.objects.exists()


@pytest.mark.parametrize("networks", GOOD_NETWORKS)
def test_a_host_with_a_list_of_distinct_network_names_is_created(api, cluster, networks):
    response = api.post("/api/hosts/", host_body(cluster, networks=networks), format="json")

    assert response.status_code == 201, response.json()
    assert Host.objects.get().networks == networks


@pytest.mark.parametrize("networks", GOOD_NETWORKS)
def test_a_template_with_a_list_of_distinct_network_names_is_created(api, networks):
    response = api.post("/api/templates/", {"name": "t", "networks": networks}, format="json")

    assert response.status_code == 201, response.json()
    assert Template.objects.get().networks == networks


def test_listing_a_network_twice_says_so():
    with pytest.raises(ValidationError) as refused:
        validate_network_names(["default", "default"])

    assert refused.value.messages == ["Each network may be listed only once."]


def test_a_network_list_that_is_not_a_list_says_so():
    with pytest.raises(ValidationError) as refused:
        validate_network_names("default")

    assert refused.value.messages == ["Networks must be a list of network names."]


@pytest.mark.parametrize("name", ["two words", "", 7, None, "-x", "n" * 65])
def test_a_bad_network_name_is_named_in_the_message(name):
    with pytest.raises(ValidationError) as refused:
        validate_network_names(["default", name])

    assert repr(name) in refused.value.messages[0]

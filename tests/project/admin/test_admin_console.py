"""The admin console: every Corral screen opens for a superuser; a cluster's admin sees and
opens only what is in their cluster; users without staff access are sent to the login page."""

from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from hosts.models import Host
from leases.models import Lease
from project.models import GroupGrant, Role, UserGrant

pytestmark = pytest.mark.django_db

CORRAL_APPS = {"project", "hosts", "scheduling", "pools", "leases"}


def registered_corral_models() -> list[str]:
    return sorted(
        model._meta.label for model in admin.site._registry if model._meta.app_label in CORRAL_APPS
    )


def admin_url(label: str, view: str, *args) -> str:
    app_label, model_name = label.lower().split(".")
    return reverse(f"admin:{app_label}_{model_name}_{view}", args=args)


def client_logged_in_as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def make_admin_object(
    admin_user,
    make_cluster,
    make_host,
    make_template,
    make_vm,
    make_pool,
    make_user,
    grant,
    make_image,
):
    """make_admin_object(label) -> a saved object of that model to open in the admin."""

    def lease():
        start = timezone.now()
        return Lease.objects.create(
            name="week", owner=admin_user, start_date=start, end_date=start + timedelta(days=7)
        )

    def custom_role():
        return Role.objects.create(name="Auditor", description="Reads everything.")

    def user_grant():
        given = grant(make_user(), "UserRole", make_cluster())
        return UserGrant.objects.get(pk=int(given.id[1:]))

    def group_grant():
        given = grant(Group.objects.create(name="ops"), "UserRole", make_vm())
        return GroupGrant.objects.get(pk=int(given.id[1:]))

    def job():
        from hosts.jobs import submit
        from hosts.models import JobKind

        return submit(JobKind.NOOP, vm=make_vm(), requested_by=admin_user)

    def external_domain():
        import uuid

        from hosts.models import ExternalDomain

        return ExternalDomain.objects.create(
            host=make_host(), uuid=uuid.uuid4(), name="stray", power_state="running"
        )

    def event():
        from project.events import alert

        return alert("vm", 1, "VM x stopped outside Corral")

    def policy():
        from scheduling.models import Policy

        return Policy.objects.get(name="evenly_distributed")

    def policy_unit():
        from scheduling.models import PolicyUnit

        return PolicyUnit.objects.get(name="Memory")

    def affinity_group():
        from scheduling.models import AffinityGroup

        return AffinityGroup.objects.create(cluster=make_cluster(), name="apart")

    def reservation():
        from leases.models import Reservation

        return Reservation.objects.create(
            lease=lease(), resource_type="virtual:instance", vcpus=1, memory_mb=128, amount=1
        )

    def application_credential():
        from openstack.identity.services import create_credential

        return create_credential(make_user(), "ci")[0]

    def api_token():
        from project.access.tokens import issue

        return issue(make_user(), name="ci-farm")[0]

    def quota():
        from hosts.models import Quota

        return Quota.objects.create(user=make_user(), vms=3)

    def vm_snapshot():
        from hosts.models import VmSnapshot

        return VmSnapshot.objects.create(vm=make_vm(), name="nightly", owner=make_user())

    factories = {
        "hosts.VmSnapshot": vm_snapshot,
        "hosts.Quota": quota,
        "project.ApplicationCredential": application_credential,
        "project.APIToken": api_token,
        "leases.Reservation": reservation,
        "scheduling.Policy": policy,
        "scheduling.PolicyUnit": policy_unit,
        "scheduling.AffinityGroup": affinity_group,
        "hosts.Job": job,
        "hosts.ExternalDomain": external_domain,
        "project.Event": event,
        "hosts.Cluster": make_cluster,
        "hosts.Host": make_host,
        "hosts.Template": make_template,
        "hosts.Image": make_image,
        "hosts.VirtualMachine": make_vm,
        "pools.VmPool": make_pool,
        "leases.Lease": lease,
        "project.Role": custom_role,
        "project.UserGrant": user_grant,
        "project.GroupGrant": group_grant,
    }

    def make(label: str):
        if label not in factories:
            pytest.fail(f"Add a factory for {label} to make_admin_object.")
        return factories[label]()

    make.labels = set(factories)
    return make


# --- A superuser opens every screen -----------------------------------------------------------

SCREENS = [
    "hosts.Cluster",
    "hosts.Host",
    "hosts.Template",
    "hosts.Image",
    "hosts.VirtualMachine",
    "pools.VmPool",
    "leases.Lease",
    "project.Role",
    "project.UserGrant",
    "project.GroupGrant",
    "hosts.Job",
    "hosts.ExternalDomain",
    "project.Event",
    "scheduling.Policy",
    "scheduling.PolicyUnit",
    "scheduling.AffinityGroup",
    "leases.Reservation",
    "project.ApplicationCredential",
    "project.APIToken",
    "hosts.Quota",
    "hosts.VmSnapshot",
]
# Records Corral writes itself: listed and opened, never added by hand.
READ_ONLY = {
    "hosts.Image",  # uploaded through the API (a streamed file), then named and deleted here
    "hosts.Job",
    "hosts.ExternalDomain",
    "project.Event",
    "project.ApplicationCredential",  # made by their owners through Keystone's API
    "project.APIToken",  # made by their owners, shown to them alone
    "scheduling.PolicyUnit",
    "leases.Lease",
    "leases.Reservation",
    "hosts.VmSnapshot",  # taken from the portal or the API; reverted to and deleted as jobs
}


def skip_unless_registered(label: str) -> None:
    if label not in registered_corral_models():
        pytest.skip(f"{label} has no admin screen yet")


def test_every_registered_corral_model_is_covered_here(make_admin_object):
    assert set(registered_corral_models()) <= set(SCREENS) & make_admin_object.labels


def test_the_admin_index_lists_corral_screens_for_a_superuser(admin_user):
    response = client_logged_in_as(admin_user).get(reverse("admin:index"))

    assert response.status_code == 200
    for label in registered_corral_models():
        assert admin_url(label, "changelist") in response.content.decode()


@pytest.mark.parametrize("label", SCREENS)
def test_superuser_opens_the_list(admin_user, make_admin_object, label):
    skip_unless_registered(label)
    obj = make_admin_object(label)

    response = client_logged_in_as(admin_user).get(admin_url(label, "changelist"))

    assert response.status_code == 200
    assert obj.pk in {row.pk for row in response.context["cl"].result_list}


@pytest.mark.parametrize("label", SCREENS)
def test_superuser_opens_the_change_form(admin_user, make_admin_object, label):
    skip_unless_registered(label)
    obj = make_admin_object(label)

    response = client_logged_in_as(admin_user).get(admin_url(label, "change", obj.pk))

    assert response.status_code == 200
    assert response.context["original"].pk == obj.pk


@pytest.mark.parametrize("label", sorted(set(SCREENS) - READ_ONLY))
def test_superuser_opens_the_add_form(admin_user, label):
    skip_unless_registered(label)

    response = client_logged_in_as(admin_user).get(admin_url(label, "add"))

    assert response.status_code == 200


@pytest.mark.parametrize("label", sorted(READ_ONLY))
def test_records_corral_writes_cannot_be_added_by_hand(admin_user, label):
    response = client_logged_in_as(admin_user).get(admin_url(label, "add"))

    assert response.status_code == 403


@pytest.mark.parametrize("label", SCREENS)
def test_superuser_searches_the_list(admin_user, make_admin_object, label):
    skip_unless_registered(label)
    make_admin_object(label)

    response = client_logged_in_as(admin_user).get(admin_url(label, "changelist"), {"q": "x"})

    assert response.status_code == 200


# --- A cluster's admin sees only their cluster ------------------------------------------------


@pytest.fixture
def cluster_a(make_cluster):
    return make_cluster("cluster-a")


@pytest.fixture
def cluster_b(make_cluster):
    return make_cluster("cluster-b")


@pytest.fixture
def staff_admin_of_a(make_user, grant, cluster_a):
    user = make_user("staffer", is_staff=True)
    grant(user, "ClusterAdmin", cluster_a)
    return user


@pytest.fixture
def console(staff_admin_of_a):
    return client_logged_in_as(staff_admin_of_a)


@pytest.fixture
def hosts_of_a_and_b(make_host, cluster_a, cluster_b):
    return make_host(cluster_a, name="host-a"), make_host(cluster_b, name="host-b")


@pytest.fixture
def vms_of_a_and_b(make_vm, cluster_a, cluster_b):
    return make_vm(cluster_a, name="vm-a"), make_vm(cluster_b, name="vm-b")


def listed_names(response) -> set[str]:
    assert response.status_code == 200
    return {row.name for row in response.context["cl"].result_list}


def refused(response) -> bool:
    """Django's admin answers an object the user may not see as if it did not exist: a
    redirect to the admin index ("Perhaps it was deleted?"), or a 403/404."""
    if response.status_code in (403, 404):
        return True
    return response.status_code == 302 and response["Location"] == reverse("admin:index")


def test_cluster_admin_sees_only_their_clusters_hosts(console, hosts_of_a_and_b):
    response = console.get(admin_url("hosts.Host", "changelist"))

    assert listed_names(response) == {"host-a"}


def test_cluster_admin_sees_only_their_clusters_vms(console, vms_of_a_and_b):
    response = console.get(admin_url("hosts.VirtualMachine", "changelist"))

    assert listed_names(response) == {"vm-a"}


def test_cluster_admin_sees_only_their_cluster(console, cluster_a, cluster_b):
    response = console.get(admin_url("hosts.Cluster", "changelist"))

    assert listed_names(response) == {"cluster-a"}


def test_cluster_admin_opens_a_host_of_their_cluster(console, hosts_of_a_and_b):
    host_a, _ = hosts_of_a_and_b

    response = console.get(admin_url("hosts.Host", "change", host_a.pk))

    assert response.status_code == 200
    assert response.context["original"] == host_a


def test_cluster_admin_is_refused_a_host_of_another_cluster(console, hosts_of_a_and_b):
    _, host_b = hosts_of_a_and_b

    response = console.get(admin_url("hosts.Host", "change", host_b.pk))

    assert refused(response)


def test_cluster_admin_is_refused_a_vm_of_another_cluster(console, vms_of_a_and_b):
    _, vm_b = vms_of_a_and_b

    response = console.get(admin_url("hosts.VirtualMachine", "change", vm_b.pk))

    assert refused(response)


def test_cluster_admin_cannot_delete_a_host_of_another_cluster(console, hosts_of_a_and_b):
    _, host_b = hosts_of_a_and_b

    response = console.post(admin_url("hosts.Host", "delete", host_b.pk), {"post": "yes"})

    assert refused(response)
    assert Host.objects.filter(pk=host_b.pk).exists()


def test_cluster_admin_is_offered_only_their_cluster_for_a_new_host(console, cluster_a, cluster_b):
    response = console.get(admin_url("hosts.Host", "add"))

    assert response.status_code == 200
    offered = response.context["adminform"].form.fields["cluster"].queryset
    assert list(offered) == [cluster_a]


def test_cluster_admin_cannot_move_a_host_into_another_cluster(
    console, hosts_of_a_and_b, cluster_b
):
    host_a, _ = hosts_of_a_and_b
    form = {
        "name": host_a.name,
        "cluster": cluster_b.pk,
        "uri": host_a.uri,
        "description": "",
        "networks": "[]",
    }

    response = console.post(admin_url("hosts.Host", "change", host_a.pk), form)

    assert response.status_code == 200
    assert "cluster" in response.context["adminform"].form.errors
    host_a.refresh_from_db()
    assert host_a.cluster_id != cluster_b.pk


def test_cluster_admin_changes_a_host_of_their_cluster(console, hosts_of_a_and_b, cluster_a):
    host_a, _ = hosts_of_a_and_b
    form = {
        "name": host_a.name,
        "cluster": cluster_a.pk,
        "uri": host_a.uri,
        "description": "Rack 7",
        "networks": "[]",
        "storage_pool": "corral",
    }

    response = console.post(admin_url("hosts.Host", "change", host_a.pk), form)

    assert response.status_code == 302, response.context["adminform"].form.errors
    host_a.refresh_from_db()
    assert host_a.description == "Rack 7"


def test_cluster_admin_does_not_see_the_lease_screen(console):
    response = console.get(reverse("admin:index"))

    assert response.status_code == 200
    assert admin_url("leases.Lease", "changelist") not in response.content.decode()


# --- No staff access, no console --------------------------------------------------------------


@pytest.fixture
def non_staff_cluster_admin(make_user, grant, cluster_a):
    user = make_user("outsider")
    grant(user, "ClusterAdmin", cluster_a)
    return user


@pytest.mark.parametrize(
    "url",
    [
        reverse("admin:index"),
        admin_url("hosts.Host", "changelist"),
        admin_url("hosts.VirtualMachine", "changelist"),
    ],
)
def test_a_user_without_staff_access_is_sent_to_login(non_staff_cluster_admin, url):
    response = client_logged_in_as(non_staff_cluster_admin).get(url)

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_an_anonymous_visitor_is_sent_to_login(db):
    response = Client().get(admin_url("hosts.Host", "changelist"))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))

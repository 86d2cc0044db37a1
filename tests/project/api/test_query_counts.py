"""Every list endpoint answers in a fixed number of queries, however many rows it shows, and
restrict() turns any number of rows into one query."""

import itertools

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext

from hosts.models import Cluster, Host, Template, VirtualMachine
from project.access.permissions import permission_for, restrict
from project.models import Role

pytestmark = pytest.mark.django_db
User = get_user_model()

# The most queries each list endpoint may take, whatever the number of rows it shows.
MAX_LIST_QUERIES = {
    "clusters": 2,  # count, page
    "hosts": 2,
    "templates": 2,
    "vms": 2,  # owners joined
    "permissions": 7,  # count, page, roles, users, groups, one per kind of granted object
    "users": 3,  # count, page, groups
    "groups": 3,  # count, page, members
    "roles": 4,  # count, page, actions, their content types
    "jobs": 3,  # count, page, journals
    "externaldomains": 2,
    "schedulingpolicies": 5,  # count, page, filters, weights (with units), clusters
    "schedulingpolicyunits": 2,
    "affinitygroups": 4,  # count, page, VMs, hosts
}
_serial = itertools.count(1)


@pytest.fixture
def cluster_a(make_cluster):
    return make_cluster("cluster-a")


@pytest.fixture
def scoped_user(make_user, grant, cluster_a):
    """A user with one grant: ClusterAdmin of cluster A."""
    user = make_user("scoped")
    grant(user, "ClusterAdmin", cluster_a)
    return user


@pytest.fixture
def viewer(request, admin_user, scoped_user):
    return {"superuser": admin_user, "scoped": scoped_user}[request.param]


@pytest.fixture
def add_rows(cluster_a, scoped_user, make_host, make_template, make_vm, grant):
    """add_rows(kind, n): n more rows of that kind, each visible to the scoped user where a
    cluster grant can make it so, and each with its related objects filled in."""
    template = make_template("base", cluster=cluster_a)

    def make_user(username):
        # No password: hashing one per row would make the test slow for nothing.
        return User.objects.create(username=username)

    def clusters(i):
        Cluster.objects.create(name=f"extra-{i}")

    def hosts(i):
        make_host(cluster_a, name=f"kvm-{i}", networks=["default"])

    def templates(i):
        make_template(f"tmpl-{i}", cluster=cluster_a, networks=["default"])

    def vms(i):
        host = make_host(cluster_a, name=f"vm-host-{i}")
        make_vm(cluster_a, template, name=f"vm-{i}", host=host, owner=make_user(f"owner-{i}"))

    def permissions(i):
        group = Group.objects.create(name=f"grant-group-{i}")
        vm = make_vm(cluster_a, template, name=f"granted-vm-{i}")
        grant(make_user(f"grantee-{i}"), "UserRole", cluster_a)
        grant(group, "UserRole", vm)

    def users(i):
        user = make_user(f"member-{i}")
        user.groups.add(Group.objects.create(name=f"user-group-{i}"))

    def groups(i):
        group = Group.objects.create(name=f"team-{i}")
        group.user_set.add(scoped_user, make_user(f"teammate-{i}"))

    def roles(i):
        role = Role.objects.create(name=f"Custom{i}")
        role.actions.set(
            [permission_for("hosts.view_virtualmachine"), permission_for("hosts.view_cluster")]
        )

    def jobs(i):
        from hosts.jobs import submit
        from hosts.models import JobKind

        job = submit(JobKind.NOOP, vm=make_vm(cluster_a, template, name=f"job-vm-{i}"))
        job.journal.create(message="step")

    def externaldomains(i):
        import uuid

        from hosts.models import ExternalDomain

        ExternalDomain.objects.create(
            host=make_host(cluster_a, name=f"ext-host-{i}"), uuid=uuid.uuid4(), name=f"ext-{i}"
        )

    def schedulingpolicies(i):
        from scheduling.models import Policy
        from scheduling.services import clone

        clone(Policy.objects.get(name="evenly_distributed"), f"copy-{i}")

    def schedulingpolicyunits(i):
        from scheduling.models import PolicyUnit

        PolicyUnit.objects.create(
            name=f"custom-{i}", implementation=f"x.Unit{i}", internal=False, is_filter=True
        )

    def affinitygroups(i):
        from scheduling.models import AffinityGroup

        group = AffinityGroup.objects.create(cluster=cluster_a, name=f"group-{i}")
        group.vms.add(make_vm(cluster_a, template, name=f"aff-vm-{i}"))
        group.hosts.add(make_host(cluster_a, name=f"aff-host-{i}"))

    makers = {
        "jobs": jobs,
        "externaldomains": externaldomains,
        "schedulingpolicies": schedulingpolicies,
        "schedulingpolicyunits": schedulingpolicyunits,
        "affinitygroups": affinitygroups,
        "clusters": clusters,
        "hosts": hosts,
        "templates": templates,
        "vms": vms,
        "permissions": permissions,
        "users": users,
        "groups": groups,
        "roles": roles,
    }

    def add(kind: str, n: int) -> None:
        for _ in range(n):
            makers[kind](next(_serial))

    return add


def count_queries(client, url: str):
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url, {"limit": 1000})
    assert response.status_code == 200, response.json()
    return len(captured), response.json()["count"]


LIST_ENDPOINTS = [
    "clusters",
    "hosts",
    "templates",
    "vms",
    "permissions",
    "users",
    "groups",
    "roles",
]


@pytest.mark.slow
@pytest.mark.parametrize("viewer", ["superuser", "scoped"], indirect=True)
@pytest.mark.parametrize("kind", MAX_LIST_QUERIES)
def test_list_takes_as_many_queries_for_200_rows_as_for_5(
    kind, viewer, add_rows, client_for, django_assert_max_num_queries
):
    client = client_for(viewer)
    url = f"/api/{kind}/"
    add_rows(kind, 5)
    queries_for_5, shown_for_5 = count_queries(client, url)
    add_rows(kind, 195)

    with django_assert_max_num_queries(MAX_LIST_QUERIES[kind]):
        queries_for_200, shown_for_200 = count_queries(client, url)

    assert queries_for_200 == queries_for_5
    assert shown_for_200 >= shown_for_5


@pytest.mark.parametrize("viewer", ["superuser", "scoped"], indirect=True)
@pytest.mark.parametrize(
    "kind,grows_for_scoped",
    [
        ("clusters", False),
        ("hosts", True),
        ("templates", True),
        ("vms", True),
        ("permissions", True),
        ("users", False),
        ("groups", True),
        ("roles", True),
    ],
)
def test_the_added_rows_are_listed(kind, grows_for_scoped, viewer, add_rows, client_for):
    """The query-count comparison above means something only if the rows are really shown."""
    client = client_for(viewer)
    _, before = count_queries(client, f"/api/{kind}/")

    add_rows(kind, 3)
    _, after = count_queries(client, f"/api/{kind}/")

    grows = viewer.is_superuser or grows_for_scoped
    assert after - before >= 3 if grows else after == before


# --- restrict() -------------------------------------------------------------------------------


@pytest.fixture
def ten_thousand_vms(cluster_a, make_cluster, make_template):
    """10,000 VMs in cluster A and 500 in cluster B; returns the ids of A's."""
    template = make_template("bulk")
    cluster_b = make_cluster("cluster-b")

    def vm(cluster, i):
        return VirtualMachine(
            name=f"vm-{i}", cluster=cluster, template=template, vcpus=1, memory_mb=512, disk_gb=5
        )

    VirtualMachine.objects.bulk_create(
        [vm(cluster_a, i) for i in range(10_000)] + [vm(cluster_b, i) for i in range(500)],
        batch_size=2000,
    )
    return set(VirtualMachine.objects.filter(cluster=cluster_a).values_list("pk", flat=True))


@pytest.mark.slow
def test_restrict_of_10000_vms_is_one_query(scoped_user, ten_thousand_vms):
    with CaptureQueriesContext(connection) as captured:
        visible = list(
            restrict(VirtualMachine.objects.all(), scoped_user, "hosts.view_virtualmachine")
        )

    assert len(captured) == 1
    assert {vm.pk for vm in visible} == ten_thousand_vms


@pytest.mark.slow
def test_restrict_through_a_group_grant_is_one_query(make_user, grant, cluster_a, ten_thousand_vms):
    user = make_user()
    team = Group.objects.create(name="team")
    team.user_set.add(user)
    grant(team, "UserRole", cluster_a)

    with CaptureQueriesContext(connection) as captured:
        visible = set(
            restrict(
                VirtualMachine.objects.all(), user, "hosts.operate_virtualmachine"
            ).values_list("pk", flat=True)
        )

    assert len(captured) == 1
    assert visible == ten_thousand_vms


@pytest.mark.parametrize("model", [Cluster, Host, Template, VirtualMachine])
def test_restrict_is_one_query_for_every_inventory_model(scoped_user, model, make_vm, make_host):
    make_vm()
    make_host()

    with CaptureQueriesContext(connection) as captured:
        list(restrict(model.objects.all(), scoped_user, f"hosts.view_{model._meta.model_name}"))

    assert len(captured) == 1
